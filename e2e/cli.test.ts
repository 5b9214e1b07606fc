// The real `grove` binary against a real server.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { listWorkspacesResponseSchema } from '@grove/contracts';
import { TOKEN, useServer } from './harness.ts';

const fx = useServer('cli', { GROVE_MAX_RUNNING: '2' });

const exec = promisify(execFile);
const bin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../apps/cli/bin/grove.mjs');

async function grove(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await exec(process.execPath, [bin, ...args], { env: { ...process.env, GROVE_URL: fx.s.base, GROVE_TOKEN: TOKEN } });
    return { code: 0, ...r };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

describe('grove CLI', () => {
  it('forks with progress, lists as a table and as JSON, stops and removes', async () => {
    const fork = await grove('fork', 'demo', 'cli-a');
    expect(fork.code).toBe(0);
    expect(fork.stdout).toContain('demo~cli-a: running');
    expect(fork.stderr).toContain('worktree ready');
    expect(fork.stderr).toContain('ready');

    const ls = await grove('ls');
    expect(ls.stdout).toMatch(/demo~cli-a\s+running\s+grove\/cli-a/);
    expect(ls.stdout).toContain('2 / 2 sandboxes running');

    const json = await grove('ls', '--json');
    const parsed = listWorkspacesResponseSchema.parse(JSON.parse(json.stdout));
    expect(parsed.capacity).toEqual({ running: 2, creating: 0, cap: 2, queued: 0 });

    const full = await grove('fork', 'demo', 'cli-b');
    expect(full.code).toBe(4);
    expect(full.stderr).toMatch(/sandbox slots are in use/);

    expect((await grove('stop', 'demo~cli-a')).stdout).toContain('stopped');
    const logs = await grove('logs', 'demo~cli-a');
    expect(logs.stdout).toContain('workspace.stopped');
    expect((await grove('rm', 'demo~cli-a')).stdout).toContain('gone');
  });

  it('exits with codes scripts can rely on', async () => {
    expect((await grove('stop', 'demo~missing')).code).toBe(3);
    expect((await grove('fork', 'demo', 'Bad/Name')).code).toBe(2);
    expect((await grove('nonsense')).code).toBe(2);
    const help = await grove('--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Exit codes');
    const denied = await exec(process.execPath, [bin, 'ls'], { env: { ...process.env, GROVE_URL: fx.s.base, GROVE_TOKEN: 'wrong-token-wrong-token' } }).catch((e: { code: number }) => e);
    expect((denied as { code: number }).code).toBe(6);
  });
});
