import { mkdir, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { GroveError } from '@grove/contracts';
import { execGit } from './git-exec.ts';

/**
 * git against remotes (clone, fetch, push, ls-remote), through git-exec.ts like every host git call (fresh
 * environment, explicit GIT_DIR, no global or system config whose url.insteadOf or helpers could redirect or
 * prompt, hooks and fsmonitor off, a deadline), plus: only the file, http(s) and ssh transports (never ext:: or
 * fd::; git-exec's protocol.allow=never stays the default), ssh in batch mode, and the server user's HOME so ssh
 * finds its keys. Positional arguments come after "--" where git accepts it; sources are validated by
 * projectSourceSchema before they get here.
 */

const TRANSPORTS: ReadonlyArray<readonly [string, string]> = [
  ['protocol.file.allow', 'always'],
  ['protocol.http.allow', 'always'],
  ['protocol.https.allow', 'always'],
  ['protocol.ssh.allow', 'always'],
];

export type RemoteFailure = 'unreachable' | 'auth' | 'not_a_repository' | 'non_fast_forward' | 'remote_rejected' | 'other';

export class RemoteGitError extends Error {
  override name = 'RemoteGitError';
  constructor(
    message: string,
    readonly reason: RemoteFailure,
    readonly stderr: string,
  ) {
    super(message);
  }
}

/** What went wrong, from git's own words (stderr of clone, fetch, ls-remote or push). */
export function classifyRemoteFailure(stderr: string): RemoteFailure {
  if (/\(non-fast-forward\)|\(fetch first\)|\[rejected\]/.test(stderr)) return 'non_fast_forward';
  if (/\[remote rejected\]/.test(stderr)) return 'remote_rejected';
  if (/could not read (Username|Password)|Authentication failed|Permission denied|terminal prompts disabled|HTTP Basic: Access denied|returned error: 40[13]|Host key verification failed/i.test(stderr)) {
    return 'auth';
  }
  if (/does not appear to be a git repository|Repository not found|not a git repository|repository '[^']*' does not exist|invalid gitfile format|does not look like a v\d bundle|returned error: 404/i.test(stderr)) return 'not_a_repository';
  if (/Could not resolve host|Connection refused|Connection timed out|No route to host|Failed to connect|unable to access|Could not read from remote repository|Network is unreachable|timed out/i.test(stderr)) {
    return 'unreachable';
  }
  return 'other';
}

export interface RemoteGitOptions {
  /** The repository (GIT_DIR); for a clone, the destination, which clone creates. */
  gitDir: string;
  /** cwd when gitDir does not exist yet (a clone): its host-only parent. */
  cwd?: string;
  /** Extra variables, e.g. a GIT_CONFIG_* header for one push; never logged. */
  env?: Record<string, string>;
  timeoutMs?: number;
  /** Strings to blank out of any error text (a token that might be echoed). */
  redact?: string[];
  /** GROVE_GIT_SSH_COMMAND (validated by gitSshCommandSchema); default plain ssh with the server user's ~/.ssh. */
  sshCommand?: string | null;
}

const SSH_HARDENING = '-o BatchMode=yes -o ConnectTimeout=15';

/**
 * GIT_SSH_COMMAND: BatchMode (fail instead of asking for a passphrase or a host key) right after the program, so
 * it comes before anything a configured command adds (ssh keeps an option's first value).
 */
export function gitSshCommand(custom?: string | null): string {
  if (!custom) return `ssh ${SSH_HARDENING}`;
  const program = /^\S+/.exec(custom)?.[0] ?? 'ssh';
  return `${program} ${SSH_HARDENING}${custom.slice(program.length)}`;
}

function scrub(text: string, redact: string[] = []): string {
  let out = text;
  for (const s of redact) if (s) out = out.split(s).join('***');
  // Credentials in a URL git echoes back (https://user:secret@host) never reach a message.
  return out.replace(/([a-z]+:\/\/)[^/@\s:]*:[^/@\s]*@/gi, '$1***@');
}

/** Run git for a remote operation; rejects with RemoteGitError (classified) on failure. */
export async function remoteGit(args: string[], o: RemoteGitOptions): Promise<{ stdout: string; stderr: string }> {
  const timeoutMs = o.timeoutMs ?? 120_000;
  const r = await execGit({
    gitDir: o.gitDir,
    cwd: o.cwd,
    args,
    config: TRANSPORTS,
    // ssh reads keys and known_hosts from HOME unless the server's GROVE_GIT_SSH_COMMAND says otherwise.
    home: 'user',
    env: { GIT_SSH_COMMAND: gitSshCommand(o.sshCommand), ...o.env },
    timeoutMs,
  });
  const stdout = r.stdout.toString('utf8');
  if (r.code === 0 && !r.timedOut && !r.overflow) return { stdout, stderr: r.stderr };
  const text = scrub(`${r.stderr}\n${stdout}`.trim() || `git exited with ${r.code}`, o.redact);
  if (r.timedOut) throw new RemoteGitError(`timed out after ${timeoutMs} ms`, 'unreachable', text);
  throw new RemoteGitError(text, classifyRemoteFailure(text), text);
}

const CLONE_HINT: Record<RemoteFailure, string> = {
  unreachable: 'check the address and that this host can reach it',
  auth: 'the remote refused this host\'s credentials (ssh key or none); Grove never prompts',
  not_a_repository: 'there is no git repository at that address',
  non_fast_forward: '',
  remote_rejected: '',
  other: 'see the message',
};

/**
 * Clone source as a bare repository at dest. On any failure dest is removed and the error says why
 * (remote_failed with reason unreachable or auth, invalid_input when there is no repository there).
 */
export async function cloneBareFrom(source: string, dest: string, opts: { timeoutMs?: number; sshCommand?: string | null } = {}): Promise<void> {
  await mkdir(dirname(dest), { recursive: true });
  try {
    await remoteGit(['clone', '--bare', '--quiet', '--', source, dest], { gitDir: dest, cwd: dirname(dest), timeoutMs: opts.timeoutMs ?? 600_000, sshCommand: opts.sshCommand });
  } catch (e) {
    await rm(dest, { recursive: true, force: true });
    if (!(e instanceof RemoteGitError)) throw e;
    const what = `could not clone ${scrub(source)}: ${CLONE_HINT[e.reason]} (${e.message})`;
    if (e.reason === 'not_a_repository') throw new GroveError('invalid_input', what, { details: { reason: e.reason } });
    throw new GroveError('remote_failed', what, { details: { op: 'clone', reason: e.reason } });
  }
}

/**
 * Refspecs that mirror the remote's branches into the primary clone, except Grove's own grove/* branches
 * (workspace branches live there; a published one exists on the remote too and must not be overwritten,
 * nor pruned while it exists only here).
 */
export const MIRROR_REFSPECS = ['+refs/heads/*:refs/heads/*', '^refs/heads/grove/*'];

/** git fetch --prune of origin into the bare primary clone. Call under the repository lock. */
export async function fetchPrune(repo: string, opts: { timeoutMs?: number; sshCommand?: string | null } = {}): Promise<void> {
  await remoteGit(['fetch', '--prune', '--quiet', 'origin', ...MIRROR_REFSPECS], { gitDir: repo, timeoutMs: opts.timeoutMs ?? 60_000, sshCommand: opts.sshCommand });
}

/** Where a pull request's head is kept in the primary clone: Grove's own namespace, outside refs/heads (never pushed, never pruned). */
export function pullHeadRef(n: number): string {
  return `refs/grove-pr/${n}/head`;
}

/** The pull request number of a ref made by pullHeadRef, or null for any other ref. */
export function pullOfRef(ref: string): number | null {
  const m = /^refs\/grove-pr\/([1-9][0-9]{0,9})\/head$/.exec(ref);
  return m ? Number(m[1]) : null;
}

/**
 * Fetch refs/pull/<n>/head (which GitHub and Gitea serve for every pull request) from origin into
 * pullHeadRef(n). Call under the repository lock.
 */
export async function fetchPullHead(repo: string, n: number, opts: { timeoutMs?: number } = {}): Promise<void> {
  await remoteGit(['fetch', '--quiet', '--no-tags', 'origin', `+refs/pull/${n}/head:${pullHeadRef(n)}`], { gitDir: repo, timeoutMs: opts.timeoutMs ?? 60_000 });
}

/** The URL of origin in the primary clone, or null when it has none. */
export async function originUrl(repo: string): Promise<string | null> {
  try {
    const { stdout } = await remoteGit(['config', '--get', 'remote.origin.url'], { gitDir: repo });
    return stdout.trim() || null;
  } catch {
    return null;
  }
}

/**
 * An HTTP header for this one git process, as GIT_CONFIG_* variables (in no config file, argv or URL), with
 * redirects off so the header never follows a redirect to another host.
 */
function headerEnv(header: string | undefined): Record<string, string> {
  if (!header) return {};
  return {
    GIT_CONFIG_COUNT: '2',
    GIT_CONFIG_KEY_0: 'http.extraHeader',
    GIT_CONFIG_VALUE_0: header,
    GIT_CONFIG_KEY_1: 'http.followRedirects',
    GIT_CONFIG_VALUE_1: 'false',
  };
}

export interface PushResult {
  /** The push created the branch on the remote (it did not exist there). */
  created: boolean;
  /** The remote already had exactly this commit. */
  upToDate: boolean;
}

/**
 * Push refs/heads/<branch> to the same name on origin, never forced. header: an Authorization header for
 * http(s) remotes, passed through GIT_CONFIG_* variables so it is in no config file, argv or URL.
 */
export async function pushBranch(repo: string, branch: string, opts: { header?: string; redact?: string[]; sshCommand?: string | null } = {}): Promise<PushResult> {
  const env: Record<string, string> = headerEnv(opts.header);
  const ref = `refs/heads/${branch}`;
  const { stdout } = await remoteGit(['push', '--porcelain', 'origin', `${ref}:${ref}`], { gitDir: repo, env, redact: opts.redact, timeoutMs: 300_000, sshCommand: opts.sshCommand });
  // Porcelain lines: "<flag>\t<from>:<to>\t<summary>"; * new ref, = up to date, space fast-forward.
  const line = stdout.split('\n').find((l) => l.includes(`\t${ref}:${ref}\t`)) ?? '';
  return { created: line.startsWith('*'), upToDate: line.startsWith('=') };
}

/**
 * Delete the branch on origin, but only while it still points at commit (a lease): undoes a push of ours
 * and nothing anyone pushed since.
 */
export async function deleteRemoteBranch(repo: string, branch: string, commit: string, opts: { header?: string; redact?: string[]; sshCommand?: string | null } = {}): Promise<void> {
  const env: Record<string, string> = headerEnv(opts.header);
  const ref = `refs/heads/${branch}`;
  await remoteGit(['push', '--porcelain', `--force-with-lease=${ref}:${commit}`, 'origin', `:${ref}`], { gitDir: repo, env, redact: opts.redact, timeoutMs: 120_000, sshCommand: opts.sshCommand });
}
