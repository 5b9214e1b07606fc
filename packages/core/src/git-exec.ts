import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GroveError } from '@grove/contracts';

/**
 * The one way core runs git on the host (an eslint rule keeps node:child_process and simple-git out of the
 * rest of core). Host git runs as root over trees and repositories an agent may have written, so nothing
 * git would read from the environment, the user's files or the repository's surroundings is left to chance:
 *
 * - the environment is built from scratch: PATH, HOME and XDG_CONFIG_HOME pointing at an empty host-only
 *   directory (git reads ~/.gitconfig, ~/.config/git/{config,attributes,ignore} from there even with
 *   GIT_CONFIG_GLOBAL set), no system or global config, no prompts, no pager, no replace refs, and no GIT_*
 *   variable of the server's own;
 * - GIT_DIR is always explicit (git never discovers a repository from cwd or follows a `.git` file), and cwd
 *   is that git dir, never a directory the agent can write;
 * - the `-c` settings below neuter every way git knows to run a program or enter another repository;
 * - every call has a total deadline (SIGTERM to the process group, SIGKILL after a grace) and a cap on what
 *   it may print.
 */

// Passed through to git children; not configuration, so not in an env.ts.
// eslint-disable-next-line no-restricted-properties
const { PATH: CHILD_PATH = '/usr/local/bin:/usr/bin:/bin', HOME: USER_HOME } = process.env;

/**
 * Settings for every host git call. Command-line config wins over the repository's own, so even a config
 * that somehow got into a repository cannot switch these back on.
 */
export const HARDENED_CONFIG: ReadonlyArray<readonly [string, string]> = [
  // The fsmonitor hook is a command git runs to ask what changed: the root-execution trigger of issue 14.
  ['core.fsmonitor', 'false'],
  // Hooks are programs; /dev/null is not a directory, so git finds none.
  ['core.hooksPath', '/dev/null'],
  // Never recurse into, update or `git status` a submodule (the second trigger: status in a gitlink runs its config).
  ['submodule.recurse', 'false'],
  ['diff.ignoreSubmodules', 'all'],
  ['status.submoduleSummary', 'false'],
  // The untracked cache is stat data git trusts across runs; a throwaway index gains nothing from it.
  ['core.untrackedCache', 'false'],
  // Local operations never talk to a remote (a submodule URL, a promisor fetch): no transport at all.
  ['protocol.allow', 'never'],
  // No credential helper, askpass or ssh wrapper could run even if something asked.
  ['credential.helper', ''],
  ['core.askPass', ''],
  // No global attributes file (in-tree .gitattributes can only name drivers; no config defines one).
  ['core.attributesFile', '/dev/null'],
  // No auto gc or maintenance: host git never repacks or prunes behind a caller's back (the per-workspace
  // stores borrow objects from the primary through alternates).
  ['gc.auto', '0'],
  ['maintenance.auto', 'false'],
  // Names come out as bytes, not octal escapes (outputs are parsed).
  ['core.quotePath', 'false'],
];

let emptyHome: string | null = null;

/** An empty directory only the host user can write, created once per process: git's HOME and XDG_CONFIG_HOME. */
export function gitHome(): string {
  if (emptyHome) return emptyHome;
  const dir = mkdtempSync(join(tmpdir(), 'grove-git-home-'));
  mkdirSync(join(dir, '.config'), { mode: 0o700 });
  emptyHome = dir;
  // Gone with the process (nothing is ever written there).
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export interface GitExecOptions {
  /** The repository: always explicit (GIT_DIR). Also git's cwd and its one safe.directory. */
  gitDir: string;
  args: readonly string[];
  /** git's cwd, when gitDir does not exist yet (init, clone): a host-only directory, never the agent's tree. */
  cwd?: string;
  /** GIT_WORK_TREE: the agent's tree, when git must read it (snapshots) or write it (undo, reverts). */
  workTree?: string;
  /** GIT_INDEX_FILE: a throwaway index in a host-only directory. */
  indexFile?: string;
  /** Further variables (identity, GIT_CONFIG_* headers, GIT_SSH_COMMAND). */
  env?: Record<string, string>;
  /** Extra -c settings after the hardened ones (e.g. the primary's info/exclude as core.excludesFile). */
  config?: ReadonlyArray<readonly [string, string]>;
  /** HOME for git: the empty host-only one (default), or the server user's (ssh keys for remotes). */
  home?: 'empty' | 'user';
  input?: string | Buffer;
  /** Total deadline in ms (default two minutes). */
  timeoutMs?: number;
  /** Most bytes of stdout kept (default 64 MiB); beyond it git is stopped. */
  maxBytes?: number;
}

export interface GitExecResult {
  code: number | null;
  stdout: Buffer;
  stderr: string;
  /** stdout went past maxBytes: git was stopped and stdout holds the first maxBytes. */
  overflow: boolean;
  timedOut: boolean;
}

const KILL_GRACE_MS = 2_000;
const STDERR_CAP = 64 * 1024;

/** The environment of every host git child: nothing inherited but PATH (and HOME when asked for). */
export function gitEnv(o: Pick<GitExecOptions, 'gitDir' | 'workTree' | 'indexFile' | 'env' | 'home'>): Record<string, string> {
  const home = gitHome();
  const env: Record<string, string> = {
    PATH: CHILD_PATH,
    HOME: o.home === 'user' && USER_HOME ? USER_HOME : home,
    XDG_CONFIG_HOME: join(home, '.config'),
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_ATTR_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    GIT_PAGER: 'cat',
    GIT_NO_REPLACE_OBJECTS: '1',
    GIT_DIR: o.gitDir,
    ...(o.workTree ? { GIT_WORK_TREE: o.workTree } : {}),
    ...(o.indexFile ? { GIT_INDEX_FILE: o.indexFile } : {}),
  };
  for (const [k, v] of Object.entries(o.env ?? {})) env[k] = v;
  return env;
}

export function gitArgv(o: Pick<GitExecOptions, 'gitDir' | 'workTree' | 'config' | 'args'>): string[] {
  const config: Array<readonly [string, string]> = [
    ...HARDENED_CONFIG,
    // The exact repository (and tree) this call works on, instead of safe.directory=*: worktrees belong to the
    // sandbox uid while the host runs as root.
    ['safe.directory', o.gitDir],
    ...(o.workTree ? [['safe.directory', o.workTree] as const] : []),
    ...(o.config ?? []),
  ];
  return [...config.flatMap(([k, v]) => ['-c', `${k}=${v}`]), ...o.args];
}

/** Run git; resolves with what happened (a non-zero exit is not an error here), rejects only when git cannot start. */
export function execGit(o: GitExecOptions): Promise<GitExecResult> {
  const maxBytes = o.maxBytes ?? 64 * 1024 * 1024;
  const timeoutMs = o.timeoutMs ?? 120_000;
  return new Promise((resolvePromise, reject) => {
    const child = spawn('git', gitArgv(o), {
      cwd: o.cwd ?? o.gitDir,
      env: gitEnv(o) as NodeJS.ProcessEnv,
      stdio: ['pipe', 'pipe', 'pipe'],
      // Its own process group, so the deadline also stops what git started (pack-objects, ssh).
      detached: true,
    });
    const chunks: Buffer[] = [];
    let size = 0;
    let overflow = false;
    let timedOut = false;
    let stderr = '';
    let killTimer: NodeJS.Timeout | null = null;
    const stop = (): void => {
      signal('SIGTERM');
      killTimer ??= setTimeout(() => signal('SIGKILL'), KILL_GRACE_MS);
    };
    const signal = (sig: NodeJS.Signals): void => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, sig);
      } catch {
        // Already gone.
      }
    };
    const deadline = setTimeout(() => {
      timedOut = true;
      stop();
    }, timeoutMs);
    child.stdout.on('data', (b: Buffer) => {
      if (overflow) return;
      const room = maxBytes - size;
      if (b.length > room) {
        chunks.push(b.subarray(0, room));
        size = maxBytes;
        overflow = true;
        stop();
        return;
      }
      chunks.push(b);
      size += b.length;
    });
    child.stderr.on('data', (b: Buffer) => {
      if (stderr.length < STDERR_CAP) stderr += b.toString('utf8').slice(0, STDERR_CAP - stderr.length);
    });
    // git may exit before reading all of stdin (e.g. on an error): that is its answer, not ours to crash on.
    child.stdin.on('error', () => undefined);
    child.on('error', (e) => {
      clearTimeout(deadline);
      if (killTimer) clearTimeout(killTimer);
      reject(new GroveError('git_failed', `could not run git: ${e.message}`, { cause: e }));
    });
    child.on('close', (code) => {
      clearTimeout(deadline);
      if (killTimer) clearTimeout(killTimer);
      resolvePromise({ code, stdout: Buffer.concat(chunks), stderr, overflow, timedOut });
    });
    child.stdin.end(o.input ?? '');
  });
}

/** git's stdout as text; git_failed (naming what was attempted) on a non-zero exit, a deadline or too much output. */
export async function gitText(o: GitExecOptions & { what: string }): Promise<string> {
  const r = await execGit(o);
  if (r.timedOut) throw new GroveError('git_failed', `${o.what}: git did not finish within ${o.timeoutMs ?? 120_000} ms`);
  if (r.overflow) throw new GroveError('git_failed', `${o.what}: git printed more than ${o.maxBytes ?? 64 * 1024 * 1024} bytes`);
  if (r.code !== 0) throw new GroveError('git_failed', `${o.what}: ${r.stderr.trim() || `git exited with ${r.code}`}`);
  return r.stdout.toString('utf8');
}

/** git <args> in gitDir; failures become GroveError('git_failed') naming what was attempted. */
export function raw(gitDir: string, args: string[], what = `git ${args[0] ?? ''}`, more: Partial<GitExecOptions> = {}): Promise<string> {
  return gitText({ gitDir, args, what, ...more });
}

/** Like raw, but a failure is a null (for lookups whose "no" is an exit code). */
export async function rawOrNull(gitDir: string, args: string[], more: Partial<GitExecOptions> = {}): Promise<string | null> {
  const r = await execGit({ gitDir, args, ...more });
  return r.code === 0 && !r.timedOut && !r.overflow ? r.stdout.toString('utf8') : null;
}
