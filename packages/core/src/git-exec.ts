import { fork, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
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

/**
 * `dir` made ready as git's HOME, or null when it cannot be trusted: created 0700 if missing, and if it was
 * already there, used only when it is a real directory (not a symlink) owned by this user that no one else
 * can write, with a `.config` inside that is the same. Another local user could have made it first in a
 * shared /tmp; then the caller takes a fresh mkdtemp directory instead.
 */
export function prepareGitHome(dir: string): string | null {
  const uid = process.getuid?.();
  const ours = (path: string): boolean => {
    try {
      const st = lstatSync(path);
      return st.isDirectory() && (uid === undefined || st.uid === uid) && (st.mode & 0o077) === 0;
    } catch {
      return false;
    }
  };
  for (const path of [dir, join(dir, '.config')]) {
    try {
      mkdirSync(path, { mode: 0o700 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') return null;
    }
    if (!ours(path)) return null;
  }
  return dir;
}

/**
 * An empty directory only the host user can write: git's HOME and XDG_CONFIG_HOME. One per user, shared by
 * every Grove process and kept (nothing is ever written there), so a server or test worker that is killed
 * leaves nothing behind; a per-process mkdtemp directory is the fallback when the shared one is not safe.
 */
export function gitHome(): string {
  if (emptyHome) return emptyHome;
  const shared = prepareGitHome(join(tmpdir(), `grove-git-home-${process.getuid?.() ?? 'user'}`));
  if (shared) return (emptyHome = shared);
  const dir = mkdtempSync(join(tmpdir(), 'grove-git-home-'));
  mkdirSync(join(dir, '.config'), { mode: 0o700 });
  emptyHome = dir;
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
    const chunks: Buffer[] = [];
    let size = 0;
    let overflow = false;
    let timedOut = false;
    let stderr = '';
    let killTimer: NodeJS.Timeout | null = null;
    let settled = false;
    const stop = (): void => {
      child.signal('SIGTERM');
      killTimer ??= setTimeout(() => child.signal('SIGKILL'), KILL_GRACE_MS);
    };
    const deadline = setTimeout(() => {
      timedOut = true;
      stop();
    }, timeoutMs);
    const finish = (): boolean => {
      if (settled) return false;
      settled = true;
      clearTimeout(deadline);
      if (killTimer) clearTimeout(killTimer);
      return true;
    };
    const child = startProcess(
      { file: 'git', args: gitArgv(o), cwd: o.cwd ?? o.gitDir, env: gitEnv(o), input: o.input ?? '' },
      {
        stdout: (b) => {
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
        },
        stderr: (b) => {
          if (stderr.length < STDERR_CAP) stderr += b.toString('utf8').slice(0, STDERR_CAP - stderr.length);
        },
        error: (e) => {
          if (finish()) reject(new GroveError('git_failed', `could not run git: ${e.message}`, { cause: e }));
        },
        close: (code) => {
          if (finish()) resolvePromise({ code, stdout: Buffer.concat(chunks), stderr, overflow, timedOut });
        },
      },
    );
  });
}

// ---- starting processes: through a small launcher child, so the server's heap is not forked each time ----

interface StartOptions {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  input: string | Buffer;
}

/** What a started process reports; exactly one of error and close ends it (callers ignore a second). */
interface StartHandlers {
  stdout(b: Buffer): void;
  stderr(b: Buffer): void;
  close(code: number | null): void;
  error(e: Error): void;
}

interface Started {
  /** Signal the process's group (it is started detached, as its own group leader). */
  signal(sig: NodeJS.Signals): void;
}

/**
 * Inputs past this size are started from the server itself: the launcher would copy them through its channel
 * (packs for index-pack can be gigabytes), and one fork per pack costs nothing beside moving it.
 */
const LAUNCHER_MAX_INPUT = 1024 * 1024;

/**
 * Start file as its own process group with exactly this environment. Through the launcher when it runs (or can
 * be started), else directly. fork() copies the page tables of the process that calls it, so a direct spawn
 * costs the server 2-5 ms of event loop per git process at 150-400 MB (bench: docs/benchmarks.md, "Teardown");
 * the launcher's fork costs well under one.
 */
function startProcess(o: StartOptions, h: StartHandlers): Started {
  const size = typeof o.input === 'string' ? Buffer.byteLength(o.input) : o.input.length;
  const launcher = size <= LAUNCHER_MAX_INPUT ? currentLauncher() : null;
  return launcher ? launcher.start(o, h) : startDirect(o, h);
}

function signalGroup(pid: number | undefined, sig: NodeJS.Signals): void {
  try {
    if (pid !== undefined) process.kill(-pid, sig);
  } catch {
    // Already gone.
  }
}

function startDirect(o: StartOptions, h: StartHandlers): Started {
  const child = spawn(o.file, o.args, { cwd: o.cwd, env: o.env as NodeJS.ProcessEnv, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
  child.stdout.on('data', (b: Buffer) => h.stdout(b));
  child.stderr.on('data', (b: Buffer) => h.stderr(b));
  // git may exit before reading all of stdin (e.g. on an error): that is its answer, not ours to crash on.
  child.stdin.on('error', () => undefined);
  child.on('error', (e) => h.error(e));
  child.on('close', (code) => h.close(code));
  child.stdin.end(o.input);
  return { signal: (sig) => signalGroup(child.pid, sig) };
}

interface InFlight {
  h: StartHandlers;
  pid: number | undefined;
  /** Signals asked for before the launcher said which pid the process got. */
  early: NodeJS.Signals[];
}

type LauncherMessage =
  | { t: 'pid'; id: number; pid: number }
  | { t: 'out' | 'err'; id: number; d: Uint8Array }
  | { t: 'close'; id: number; code: number | null }
  | { t: 'error'; id: number; message: string };

const LAUNCHER_FILE = fileURLToPath(new URL('./git-launcher.mjs', import.meta.url));

/** The launcher child (git-launcher.mjs): one per server process, started on first use, again after it exits. */
class Launcher {
  private readonly child: ChildProcess;
  private readonly inFlight = new Map<number, InFlight>();
  private nextId = 1;
  private dead = false;

  constructor() {
    // Its own process group (a Ctrl+C to the server's terminal would otherwise stop it under a graceful shutdown's
    // last git calls), no environment of the server's, no tsx: it is plain JavaScript. It leaves when the channel
    // closes, i.e. with the server.
    this.child = fork(LAUNCHER_FILE, [], { execArgv: [], env: {} as NodeJS.ProcessEnv, serialization: 'advanced', stdio: ['ignore', 'ignore', 'inherit', 'ipc'], detached: true });
    this.child.on('message', (m: LauncherMessage) => this.onMessage(m));
    this.child.on('error', (e) => this.gone(`failed: ${e.message}`));
    this.child.on('exit', (code, sig) => this.gone(`exited (${sig ?? `code ${code}`})`));
    // Only calls in flight keep the server's event loop alive, not the launcher itself.
    this.child.unref();
    this.child.channel?.unref();
  }

  /** The launcher's pid (tests: git's parent is the launcher, not the server). */
  get pid(): number | undefined {
    return this.child.pid;
  }

  get alive(): boolean {
    return !this.dead && this.child.connected;
  }

  start(o: StartOptions, h: StartHandlers): Started {
    const id = this.nextId++;
    const call: InFlight = { h, pid: undefined, early: [] };
    this.inFlight.set(id, call);
    if (this.inFlight.size === 1) this.child.channel?.ref();
    this.child.send({ t: 'spawn', id, file: o.file, args: o.args, cwd: o.cwd, env: o.env, input: o.input }, (e) => {
      if (e) this.end(id)?.h.error(new Error(`the git launcher did not take the call: ${e.message}`));
    });
    return {
      signal: (sig) => {
        if (call.pid === undefined) call.early.push(sig);
        else signalGroup(call.pid, sig);
      },
    };
  }

  private onMessage(m: LauncherMessage): void {
    const call = this.inFlight.get(m.id);
    if (!call) return;
    switch (m.t) {
      case 'pid':
        call.pid = m.pid;
        for (const sig of call.early.splice(0)) signalGroup(m.pid, sig);
        return;
      case 'out':
        call.h.stdout(Buffer.from(m.d.buffer, m.d.byteOffset, m.d.byteLength));
        return;
      case 'err':
        call.h.stderr(Buffer.from(m.d.buffer, m.d.byteOffset, m.d.byteLength));
        return;
      case 'close':
        this.end(m.id)?.h.close(m.code);
        return;
      case 'error':
        this.end(m.id)?.h.error(new Error(m.message));
        return;
    }
  }

  private end(id: number): InFlight | undefined {
    const call = this.inFlight.get(id);
    if (!call) return undefined;
    this.inFlight.delete(id);
    if (this.inFlight.size === 0) this.child.channel?.unref();
    return call;
  }

  /** The launcher is gone: what it was running cannot be heard any more, so each call fails (never retried: git may have run). */
  private gone(why: string): void {
    if (this.dead) return;
    this.dead = true;
    if (launcher === this) launcher = null;
    const calls = [...this.inFlight.values()];
    this.inFlight.clear();
    for (const call of calls) call.h.error(new Error(`the git launcher ${why} while git ran`));
  }
}

let launcher: Launcher | null = null;

function currentLauncher(): Launcher | null {
  if (launcher?.alive) return launcher;
  try {
    launcher = new Launcher();
    return launcher;
  } catch {
    // Cannot start one now (no process slots, say): this call goes directly, the next tries again.
    launcher = null;
    return null;
  }
}

/** The launcher's pid, starting it if needed (tests). */
export function gitLauncherPid(): number | undefined {
  return currentLauncher()?.pid;
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
