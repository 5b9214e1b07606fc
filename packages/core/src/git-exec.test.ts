import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { execGit, gitEnv, gitHome, gitLauncherPid, gitText, prepareGitHome } from './git-exec.ts';
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

  it('gives every process of this user one shared empty HOME, 0700, instead of a directory per process', () => {
    const home = gitHome();
    expect(home).toBe(join(tmpdir(), `grove-git-home-${process.getuid?.()}`));
    expect(gitEnv({ gitDir: repo })).toMatchObject({ HOME: home, XDG_CONFIG_HOME: join(home, '.config') });
    for (const dir of [home, join(home, '.config')]) {
      const st = lstatSync(dir);
      expect(st.isDirectory() && !st.isSymbolicLink()).toBe(true);
      expect(st.mode & 0o777).toBe(0o700);
    }
  });

  it('does not take over a HOME someone else could have prepared: a symlink, a writable directory, a linked .config', () => {
    const at = (name: string) => join(tmp, name);
    expect(prepareGitHome(at('fresh'))).toBe(at('fresh'));
    expect(lstatSync(join(at('fresh'), '.config')).isDirectory()).toBe(true);
    expect(prepareGitHome(at('fresh'))).toBe(at('fresh'));

    mkdirSync(at('elsewhere'), { mode: 0o700 });
    symlinkSync(at('elsewhere'), at('link'));
    expect(prepareGitHome(at('link'))).toBeNull();

    mkdirSync(at('open'), { mode: 0o700 });
    chmodSync(at('open'), 0o777);
    expect(prepareGitHome(at('open'))).toBeNull();

    mkdirSync(at('linked-config'), { mode: 0o700 });
    symlinkSync(at('elsewhere'), join(at('linked-config'), '.config'));
    expect(prepareGitHome(at('linked-config'))).toBeNull();
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

describe('the git launcher', () => {
  // git runs an alias starting with "!" through sh, so $PPID in it is git's pid, and git's own parent is in its status.
  const parentOfGit = ['-c', "alias.parent=!cat >/dev/null; sed -n 's/^PPid:[[:space:]]*//p' /proc/$PPID/status", 'parent'];

  it('starts git from the launcher, not from the server, and passes input and output through it', async () => {
    const launcher = gitLauncherPid();
    expect(launcher).toBeGreaterThan(0);
    expect(launcher).not.toBe(process.pid);
    const parent = await gitText({ gitDir: repo, args: parentOfGit, what: 'naming the parent', input: 'x' });
    expect(Number(parent.trim())).toBe(launcher);
    // The blob id of "hello\n": the input reached git and its output came back whole.
    expect((await gitText({ gitDir: repo, args: ['hash-object', '--stdin'], what: 'hashing', input: 'hello\n' })).trim()).toBe('ce013625030ba8dba906f756967f9e9ca394464a');
  });

  it('starts a call with a large input from the server itself (the launcher would copy it)', async () => {
    const parent = await gitText({ gitDir: repo, args: parentOfGit, what: 'naming the parent', input: Buffer.alloc(2 * 1024 * 1024, 120) });
    expect(Number(parent.trim())).toBe(process.pid);
  });

  it('fails the calls of a launcher that dies with git_failed, and the next call starts a new launcher', async () => {
    const first = gitLauncherPid();
    expect(first).toBeDefined();
    const hung = gitText({ gitDir: repo, args: ['-c', 'alias.z=!sleep 2', 'z'], what: 'sleeping', timeoutMs: 20_000 });
    // The call is in the launcher's hands once git is there to be waited for.
    await new Promise((r) => setTimeout(r, 200));
    process.kill(first as number, 'SIGKILL');
    await expect(hung).rejects.toMatchObject({ code: 'git_failed', message: expect.stringContaining('launcher') as string });
    expect((await gitText({ gitDir: repo, args: ['rev-parse', '--is-bare-repository'], what: 'asking' })).trim()).toBe('true');
    const second = gitLauncherPid();
    expect(second).toBeGreaterThan(0);
    expect(second).not.toBe(first);
  });
});

describe('one way to run host git', () => {
  const here = dirname(fileURLToPath(import.meta.url));
  const sources = readdirSync(here).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'));

  it('only git-exec.ts, fsutil.ts and volume.ts start processes in core, and only git-exec.ts runs git', () => {
    const starting = sources.filter((f) => /from '(node:)?child_process'|from 'simple-git'/.test(readFileSync(join(here, f), 'utf8')));
    expect(starting.sort()).toEqual(['fsutil.ts', 'git-exec.ts', 'volume.ts']);
    for (const f of ['fsutil.ts', 'volume.ts']) {
      // Their programs are named literals: chown, mount, e2fsck...; never git.
      const text = readFileSync(join(here, f), 'utf8');
      expect(text, f).not.toMatch(/\b(run|execFile|spawn|execFileSync|spawnSync)\(\s*['"`]git['"`]/);
      expect(text, f).not.toMatch(/\b(run|execFile|spawn|execFileSync|spawnSync)\(\s*[a-zA-Z_$][\w$]*\s*,/);
    }
  });
});
