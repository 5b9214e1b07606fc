// The Files view's reads (GET /files/tree, GET /files/content): one directory's entries with git status marks, one
// file's text. Everything under /workspace is the agent's, so nothing here trusts it: no link is followed, nothing but
// a regular file or a directory is opened (and only with O_NONBLOCK, so a FIFO cannot hang the read), what was opened
// is checked to be exactly the path asked for (a parent swapped for a symlink in between is noticed), sizes are
// capped, and git runs with a deadline and without the agent's fsmonitor. In a sandbox all of it runs in a child of
// the bundle started as the agent's user, so even a way around these checks reads nothing the agent could not.
import { execFile, spawn } from 'node:child_process';
import type { ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';
import { constants } from 'node:fs';
import type { Stats } from 'node:fs';
import { lstat, open, opendir, readlink, realpath } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import {
  FILE_CONTENT_CAP,
  GroveError,
  MAX_TREE_ENTRIES,
  fileContentQuerySchema,
  fileContentResponseSchema,
  filesTreeQuerySchema,
  filesTreeResponseSchema,
  isGroveError,
  parseOrThrow,
  workspacePathSegments,
} from '@grove/contracts';
import type { ErrorCode, FileContentResponse, FileEntry, FileKind, FilesTreeResponse, GitMark } from '@grove/contracts';
import type { AgentUser } from './providers/types.ts';

/** argv[2] of the backend bundle that makes it answer one files request as the agent's user and exit. */
export const READ_FILES_ARG = '--grove-read-workspace-files';
/** A NUL byte in this much of a file's beginning makes it binary (git's own rule of thumb). */
export const BINARY_SNIFF_BYTES = 8000;
const MAX_TARGET_CHARS = 1024;
/** git status must answer within this, or the tree comes without marks. */
export const GIT_STATUS_TIMEOUT_MS = 10_000;
const GIT_STATUS_MAX_BYTES = 16 * 1024 * 1024;
/** The child's whole run (git included) must end within this. */
const CHILD_DEADLINE_MS = 20_000;
/** The most a child may answer: MAX_TREE_ENTRIES entries of long paths, or FILE_CONTENT_CAP of escaped text. */
const MAX_CHILD_OUTPUT = 24 * 1024 * 1024;
/** The only environment the reader and its git get: nothing of the backend's own. */
const SAFE_PATH = '/usr/local/bin:/usr/bin:/bin';
/** Readers at once per workspace; one more is capacity_reached. */
const MAX_CONCURRENT_READS = 8;

export type FilesOp = 'tree' | 'content';

// ---- pure parts ----

/** A porcelain v1 XY code as one mark. */
export function markOf(xy: string): GitMark | null {
  if (xy === '??') return '?';
  if (xy === '!!') return null;
  const [x = ' ', y = ' '] = xy;
  if (x === 'U' || y === 'U' || xy === 'AA' || xy === 'DD') return 'U';
  if (x === 'D' || y === 'D') return 'D';
  if (x === 'R' || x === 'C') return 'R';
  if (x === 'A') return 'A';
  if (x === 'M' || y === 'M' || x === 'T' || y === 'T') return 'M';
  return null;
}

/** `git status --porcelain=v1 -z` output as path -> mark (paths from the worktree's top, as git writes them). */
export function parseGitStatus(out: string): Map<string, GitMark> {
  const marks = new Map<string, GitMark>();
  const fields = out.split('\0');
  for (let i = 0; i < fields.length; i++) {
    const field = fields[i] ?? '';
    if (field.length < 4) continue;
    const xy = field.slice(0, 2);
    const path = field.slice(3);
    // A rename or copy is followed by its source path as a field of its own.
    if (xy[0] === 'R' || xy[0] === 'C') i++;
    const mark = markOf(xy);
    if (mark) marks.set(path.replace(/\/$/, ''), mark);
  }
  return marks;
}

const MARK_RANK: Record<GitMark, number> = { U: 6, D: 5, M: 4, A: 3, R: 2, '?': 1 };

/** The marks of one directory's children: a file its own, a directory its most notable descendant's. */
export function childMarks(marks: ReadonlyMap<string, GitMark>, dir: string): Map<string, GitMark> {
  const prefix = dir === '' ? '' : `${dir}/`;
  const out = new Map<string, GitMark>();
  for (const [path, mark] of marks) {
    if (!path.startsWith(prefix)) continue;
    const name = path.slice(prefix.length).split('/')[0];
    if (!name) continue;
    const had = out.get(name);
    if (!had || MARK_RANK[mark] > MARK_RANK[had]) out.set(name, mark);
  }
  return out;
}

/** What git knows in dir that the disk does not (deleted files, and directories all of whose files were deleted). */
export function deletedChildren(marks: ReadonlyMap<string, GitMark>, dir: string, present: ReadonlySet<string>): Array<{ name: string; dir: boolean }> {
  const prefix = dir === '' ? '' : `${dir}/`;
  const found = new Map<string, boolean>();
  for (const [path, mark] of marks) {
    if (mark !== 'D' || !path.startsWith(prefix)) continue;
    const [name, ...rest] = path.slice(prefix.length).split('/');
    if (!name || present.has(name) || name === '.git') continue;
    found.set(name, (found.get(name) ?? false) || rest.length > 0);
  }
  return [...found].map(([name, isDir]) => ({ name, dir: isDir }));
}

export function looksBinary(head: Buffer): boolean {
  return head.subarray(0, BINARY_SNIFF_BYTES).includes(0);
}

export function kindOf(stat: Stats): FileKind {
  if (stat.isSymbolicLink()) return 'symlink';
  if (stat.isDirectory()) return 'dir';
  if (stat.isFile()) return 'file';
  return 'other';
}

/** Directories first, then by name (code points, so the order is the same everywhere). */
export function sortEntries(entries: FileEntry[]): FileEntry[] {
  return entries.sort((a, b) => {
    const da = a.kind === 'dir' ? 0 : 1;
    const db = b.kind === 'dir' ? 0 : 1;
    if (da !== db) return da - db;
    return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
  });
}

// ---- reading the disk ----

function notFound(path: string, why = 'there is no such file or directory in the workspace'): GroveError {
  return new GroveError('not_found', `${JSON.stringify(path)}: ${why}`, { details: { path } });
}

function refused(path: string, why: string): GroveError {
  return new GroveError('invalid_input', `${JSON.stringify(path)}: ${why}`, { details: { path } });
}

/** The checked segments of a path; `.git` is hidden at every depth, so it is as absent as a missing file. */
function segmentsOf(path: string): string[] {
  const segments = workspacePathSegments(path);
  if (segments.includes('.git')) throw notFound(path, '.git is not shown');
  return segments;
}

/**
 * Opens root/segments without following any link, and proves the opened thing is that very path: each parent is
 * lstat'ed (a symlink is refused, never followed), the last one is opened O_NOFOLLOW|O_NONBLOCK (a FIFO opens at
 * once instead of waiting for a writer, and is refused by its fstat), and /proc/self/fd says where the descriptor
 * really points, which catches a directory swapped for a link between the lstat and the open.
 */
async function openInside(root: string, path: string, segments: string[], want: 'file' | 'dir'): Promise<{ handle: FileHandle; stat: Stats }> {
  let dir = root;
  for (const segment of segments.slice(0, -1)) {
    dir = join(dir, segment);
    const st = await lstat(dir).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT' || err.code === 'ENOTDIR') throw notFound(path);
      throw err;
    });
    if (st.isSymbolicLink()) throw refused(path, `${relative(root, dir)} is a symlink; links are listed, never followed`);
    if (!st.isDirectory()) throw notFound(path, `${relative(root, dir)} is not a directory`);
  }
  const target = join(root, ...segments);
  const flags = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY | (want === 'dir' ? constants.O_DIRECTORY : 0);
  const handle = await open(target, flags).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') throw notFound(path);
    if (err.code === 'ELOOP') throw refused(path, 'it is a symlink; links are listed, never followed');
    if (err.code === 'ENOTDIR') throw refused(path, want === 'dir' ? 'it is not a directory' : 'a part of it is not a directory');
    if (err.code === 'EISDIR') throw refused(path, 'it is a directory, not a file');
    // A socket cannot be opened at all; a device without its driver answers these.
    if (err.code === 'ENXIO' || err.code === 'ENODEV' || err.code === 'EOPNOTSUPP') throw refused(path, 'it is not a regular file');
    if (err.code === 'EACCES' || err.code === 'EPERM') throw refused(path, 'the agent may not read it');
    throw err;
  });
  try {
    const stat = await handle.stat();
    if (want === 'file' && !stat.isFile()) throw refused(path, stat.isDirectory() ? 'it is a directory, not a file' : 'it is not a regular file (a FIFO, socket or device)');
    if (want === 'dir' && !stat.isDirectory()) throw refused(path, 'it is not a directory');
    const really = await readlink(`/proc/self/fd/${handle.fd}`);
    if (really !== target) throw refused(path, 'it changed while it was being opened (a link on the way?)');
    return { handle, stat };
  } catch (err) {
    await handle.close();
    throw err;
  }
}

function relative(root: string, p: string): string {
  return p === root ? '.' : p.slice(root.length + 1);
}

/** git status marks of the worktree, as the caller's user (the agent's, in a sandbox), bounded in time and bytes. */
export function gitStatusMarks(workspaceDir: string, timeoutMs = GIT_STATUS_TIMEOUT_MS): Promise<{ marks: Map<string, GitMark> } | { error: string }> {
  // core.fsmonitor would run a program the agent chose; GIT_OPTIONAL_LOCKS=0 keeps status from rewriting the index.
  const args = ['-c', 'core.fsmonitor=false', '-c', 'core.untrackedCache=false', 'status', '--porcelain=v1', '-z', '--untracked-files=all', '--ignore-submodules=all'];
  return new Promise((resolve) => {
    execFile(
      'git',
      args,
      {
        cwd: workspaceDir,
        timeout: timeoutMs,
        killSignal: 'SIGKILL',
        maxBuffer: GIT_STATUS_MAX_BYTES,
        encoding: 'utf8',
        env: Object.assign({} as NodeJS.ProcessEnv, { PATH: SAFE_PATH, GIT_OPTIONAL_LOCKS: '0', GIT_TERMINAL_PROMPT: '0', HOME: '/home/grove', LC_ALL: 'C' }),
      },
      (err, stdout, stderr) => {
        if (!err) return resolve({ marks: parseGitStatus(stdout) });
        const e = err as NodeJS.ErrnoException & { killed?: boolean };
        if (e.killed) return resolve({ error: `git status took longer than ${Math.round(timeoutMs / 1000)} s` });
        if (e.code === 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER') return resolve({ error: 'git status printed too much' });
        resolve({ error: (stderr || e.message).trim().split('\n')[0] ?? 'git status failed' });
      },
    );
  });
}

/** One directory's entries (without .git), at most MAX_TREE_ENTRIES, with their marks. */
export async function listDirectory(args: { workspaceDir: string; path: string; gitTimeoutMs?: number }): Promise<FilesTreeResponse> {
  const segments = segmentsOf(args.path);
  const root = await realpath(args.workspaceDir);
  const rel = segments.join('/');
  const status = gitStatusMarks(root, args.gitTimeoutMs);
  const { handle } = await openInside(root, args.path, segments, 'dir');
  const entries: FileEntry[] = [];
  let truncated = false;
  try {
    // Through the descriptor, not the path: the directory read is the one that was checked.
    const fdDir = `/proc/self/fd/${handle.fd}`;
    const dir = await opendir(fdDir);
    try {
      for await (const dirent of dir) {
        if (dirent.name === '.git') continue;
        if (entries.length >= MAX_TREE_ENTRIES) {
          truncated = true;
          break;
        }
        const st = await lstat(join(fdDir, dirent.name)).catch(() => null);
        if (!st) continue; // gone in between
        const kind = kindOf(st);
        const entry: FileEntry = { name: dirent.name, path: rel === '' ? dirent.name : `${rel}/${dirent.name}`, kind, size: st.size, mark: null };
        if (kind === 'symlink') entry.target = (await readlink(join(fdDir, dirent.name)).catch(() => '')).slice(0, MAX_TARGET_CHARS);
        entries.push(entry);
      }
    } finally {
      await dir.close().catch(() => undefined);
    }
  } finally {
    await handle.close();
  }
  const git = await status;
  if ('error' in git) return { path: rel, entries: sortEntries(entries), truncated, gitError: git.error };
  const marks = childMarks(git.marks, rel);
  for (const e of entries) e.mark = marks.get(e.name) ?? null;
  const present = new Set(entries.map((e) => e.name));
  for (const gone of truncated ? [] : deletedChildren(git.marks, rel, present)) {
    const path = rel === '' ? gone.name : `${rel}/${gone.name}`;
    entries.push({ name: gone.name, path, kind: gone.dir ? 'dir' : 'file', size: null, mark: 'D', deleted: true });
  }
  return { path: rel, entries: sortEntries(entries), truncated };
}

/** One regular file: its first FILE_CONTENT_CAP bytes as text, or only its size when it looks binary. */
export async function readFileContent(args: { workspaceDir: string; path: string; cap?: number }): Promise<FileContentResponse> {
  const cap = args.cap ?? FILE_CONTENT_CAP;
  const segments = segmentsOf(args.path);
  if (segments.length === 0) throw refused(args.path, 'it names the workspace itself, not a file');
  const root = await realpath(args.workspaceDir);
  const rel = segments.join('/');
  const { handle, stat } = await openInside(root, args.path, segments, 'file');
  try {
    const buf = Buffer.alloc(Math.min(cap, stat.size) + 1);
    let got = 0;
    // Read to the cap (and one byte more, to see a file that grew past it), whatever the size said.
    while (got < buf.length) {
      const { bytesRead } = await handle.read(buf, got, buf.length - got, got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    const data = buf.subarray(0, Math.min(got, cap));
    const size = Math.max(stat.size, got);
    if (looksBinary(data)) return { path: rel, binary: true, size };
    return { path: rel, binary: false, size, text: data.toString('utf8'), truncated: got > cap || stat.size > cap };
  } finally {
    await handle.close();
  }
}

/** The request's query (already split from the URL) checked, then answered in this process. */
export async function answerFiles(op: FilesOp, query: unknown, workspaceDir: string): Promise<FilesTreeResponse | FileContentResponse> {
  if (op === 'tree') {
    const q = parseOrThrow(filesTreeQuerySchema, query, { what: 'files query' });
    return listDirectory({ workspaceDir, path: q.path });
  }
  const q = parseOrThrow(fileContentQuerySchema, query, { what: 'file query' });
  return readFileContent({ workspaceDir, path: q.path });
}

// ---- as the agent's user ----

export interface FilesReader {
  read(op: FilesOp, query: Record<string, string>): Promise<FilesTreeResponse | FileContentResponse>;
}

/**
 * Answers files requests: in a child of this bundle started as `user` (the kernel clears its capabilities on that
 * setuid), whose one JSON line is checked like any other untrusted input; without a user, in this process (the
 * backend's own tests, a backend outside a sandbox).
 */
export function createFilesReader(options: { workspaceDir: string; user: AgentUser | null; entry?: string; deadlineMs?: number }): FilesReader {
  let inFlight = 0;
  return {
    async read(op, query) {
      // Checked here too, so a bad path is refused without starting a child.
      parseOrThrow(op === 'tree' ? filesTreeQuerySchema : fileContentQuerySchema, query, { what: op === 'tree' ? 'files query' : 'file query' });
      if (!options.user) return answerFiles(op, query, options.workspaceDir);
      if (inFlight >= MAX_CONCURRENT_READS) throw new GroveError('capacity_reached', `already reading ${MAX_CONCURRENT_READS} files in this workspace; try again in a moment`);
      inFlight++;
      try {
        const answer = await runChild({ ...options, user: options.user, op, query });
        if ('error' in answer) throw new GroveError(answer.error.code, answer.error.message, { details: { path: query.path ?? '' } });
        const schema = op === 'tree' ? filesTreeResponseSchema : fileContentResponseSchema;
        const parsed = schema.safeParse(answer.ok);
        if (!parsed.success) throw new GroveError('internal', 'the agent-side file reader gave an answer that does not fit the schema');
        return parsed.data;
      } finally {
        inFlight--;
      }
    },
  };
}

type ChildAnswer = { ok: unknown } | { error: { code: ErrorCode; message: string } };

const CHILD_CODES = new Set<ErrorCode>(['not_found', 'invalid_input']);

async function runChild(args: { workspaceDir: string; user: AgentUser; entry?: string; deadlineMs?: number; op: FilesOp; query: Record<string, string> }): Promise<ChildAnswer> {
  const entry = args.entry ?? process.argv[1];
  if (!entry) throw new GroveError('internal', 'cannot find the backend bundle to read files as the agent');
  const out = await new Promise<Buffer | null>((resolvePromise, reject) => {
    const child: ChildProcessByStdio<null, Readable, null> = spawn(process.execPath, [entry, READ_FILES_ARG, args.workspaceDir, args.op, JSON.stringify(args.query)], {
      uid: args.user.uid,
      gid: args.user.gid,
      cwd: args.workspaceDir,
      env: Object.assign({} as NodeJS.ProcessEnv, { PATH: SAFE_PATH, HOME: '/home/grove' }),
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: args.deadlineMs ?? CHILD_DEADLINE_MS,
      killSignal: 'SIGKILL',
    });
    const chunks: Buffer[] = [];
    let total = 0;
    let over = false;
    child.stdout.on('data', (b: Buffer) => {
      total += b.length;
      if (total > MAX_CHILD_OUTPUT) {
        over = true;
        child.kill('SIGKILL');
        return;
      }
      chunks.push(b);
    });
    child.on('error', reject);
    child.on('close', (code, signal) => resolvePromise(over || signal !== null || code !== 0 ? null : Buffer.concat(chunks)));
  });
  if (out === null) throw new GroveError('internal', 'the agent-side file reader did not finish (too slow or too much output)');
  let answer: unknown;
  try {
    answer = JSON.parse(out.toString('utf8'));
  } catch {
    throw new GroveError('internal', 'the agent-side file reader gave no answer');
  }
  if (typeof answer === 'object' && answer !== null && 'ok' in answer) return { ok: (answer as { ok: unknown }).ok };
  const error = (answer as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  // Only the codes a reader can mean; anything else it says is an internal failure, its message kept for the log.
  const code = typeof error?.code === 'string' && CHILD_CODES.has(error.code as ErrorCode) ? (error.code as ErrorCode) : 'internal';
  const message = typeof error?.message === 'string' ? error.message.slice(0, 2000) : 'the agent-side file reader failed';
  return { error: { code, message } };
}

/** The child side of createFilesReader: argv is [workspaceDir, op, queryJson]; answers one JSON line. */
export async function readFilesMain(argv: readonly string[]): Promise<string> {
  const [workspaceDir, op, queryJson] = argv;
  if (!workspaceDir || (op !== 'tree' && op !== 'content') || queryJson === undefined) {
    return JSON.stringify({ error: { code: 'internal', message: 'usage: <workspaceDir> tree|content <queryJson>' } });
  }
  try {
    return JSON.stringify({ ok: await answerFiles(op, JSON.parse(queryJson) as unknown, workspaceDir) });
  } catch (err) {
    if (isGroveError(err)) return JSON.stringify({ error: { code: err.code, message: err.message } });
    return JSON.stringify({ error: { code: 'internal', message: err instanceof Error ? err.message : String(err) } });
  }
}
