import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { execGit, gitText } from './git-exec.ts';
import { git } from './test-support/repo.ts';

const tmp = mkdtempSync(join(tmpdir(), 'grove-gitexec-'));
const repo = join(tmp, 'r.git');
git(tmp, 'init', '-q', '--bare', repo);
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('git-exec', () => {
  it('gives git a fresh environment: none of the server\'s GIT_* variables, an empty HOME, no global or system config', async () => {
    // A GIT_* variable of the server's own (it would add config to every git call if it were passed through).
    const saved = { GIT_CONFIG_PARAMETERS: process.env.GIT_CONFIG_PARAMETERS };
    process.env.GIT_CONFIG_PARAMETERS = "'core.fsmonitor'='touch /tmp/x'";
    try {
      const out = await gitText({ gitDir: repo, args: ['config', '--show-origin', '--list'], what: 'listing config' });
      // Only the command line (git-exec's settings) and the repository's own file.
      for (const line of out.trim().split('\n')) expect(line.startsWith('command line:') || line.startsWith(`file:${repo}/config\t`), line).toBe(true);
      expect(out).toContain('command line:\tcore.fsmonitor=false');
      expect(out).toContain(`command line:\tsafe.directory=${repo}`);
      expect(out).not.toContain('safe.directory=*');
      expect(out).not.toContain('touch /tmp/x');
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });

  it('kills git (and what it started) at the deadline', async () => {
    const hung = await execGit({ gitDir: repo, args: ['-c', 'alias.x=!sleep 30', 'x'], timeoutMs: 300 });
    expect(hung.timedOut).toBe(true);
    expect(hung.code).not.toBe(0);
    await expect(gitText({ gitDir: repo, args: ['-c', 'alias.x=!sleep 30', 'x'], timeoutMs: 300, what: 'sleeping' })).rejects.toMatchObject({ code: 'git_failed', message: expect.stringContaining('did not finish') as string });
  });

  it('stops git once its output passes the cap and says so', async () => {
    const r = await execGit({ gitDir: repo, args: ['-c', 'alias.y=!yes', 'y'], maxBytes: 1000, timeoutMs: 20_000 });
    expect(r.overflow).toBe(true);
    expect(r.timedOut).toBe(false);
    expect(r.stdout.length).toBe(1000);
  });
});
