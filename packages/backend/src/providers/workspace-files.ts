import { spawn } from 'node:child_process';
import type { ChildProcessByStdio } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { constants } from 'node:fs';
import { lstat, mkdir, open, realpath } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { GroveError } from '@grove/contracts';
import type { AgentUser } from './types.ts';

/** argv[2] of the backend bundle that makes it write one file (content on stdin) and exit: see writeWorkspaceFileAs. */
export const WRITE_FILE_ARG = '--grove-write-workspace-file';
/** The most a child writer reports back; its answer is one short JSON line. */
const MAX_CHILD_OUTPUT = 64 * 1024;
const CHILD_DEADLINE_MS = 30_000;

/**
 * Writes a file an agent asked for, strictly inside the workspace. The container already confines
 * the agent, but a provider tool must still not follow `../` or a symlink planted in the repository
 * out of /workspace (into the mounted git admin dir, the socket dir or the thread).
 */
export async function writeWorkspaceFile(args: { workspaceDir: string; relPath: string; content: string }): Promise<{ bytes: number }> {
  const segments = checkRelativePath(args.relPath);
  const root = await realpath(args.workspaceDir);
  const target = resolve(root, ...segments);
  const rel = relative(root, target);
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) throw refuse(args.relPath, 'it resolves outside the workspace');

  // Walk the parents one by one instead of mkdir -p, so a symlinked directory is noticed, not followed.
  let dir = root;
  for (const segment of segments.slice(0, -1)) {
    dir = join(dir, segment);
    await ensureRealDirectory(dir, args.relPath);
  }

  const data = Buffer.from(args.content, 'utf8');
  // O_NOFOLLOW: a symlink as the last component fails with ELOOP instead of writing through it.
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;
  const file = await open(target, flags, 0o644).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ELOOP') throw refuse(args.relPath, 'it is a symlink');
    if (err.code === 'EISDIR') throw refuse(args.relPath, 'it is a directory');
    throw err;
  });
  try {
    await file.writeFile(data);
  } finally {
    await file.close();
  }
  return { bytes: data.length };
}

/** The path's segments, or GroveError(invalid_input) saying which rule it breaks. */
export function checkRelativePath(relPath: string): string[] {
  if (relPath === '') throw refuse(relPath, 'it is empty');
  if (relPath.includes('\0')) throw refuse(relPath, 'it contains a NUL byte');
  if (isAbsolute(relPath)) throw refuse(relPath, 'it is absolute; give a path relative to the workspace');
  const segments = relPath.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) throw refuse(relPath, 'it contains ".." (no escaping the workspace)');
  if (segments.length === 0) throw refuse(relPath, 'it names the workspace itself, not a file');
  return segments;
}

async function ensureRealDirectory(dir: string, relPath: string): Promise<void> {
  const stat = await lstat(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (stat === null) {
    const created = await mkdir(dir).then(
      () => true,
      (err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err;
        return false;
      },
    );
    // Created by someone else in between: check what it is rather than trusting it.
    if (!created) await ensureRealDirectory(dir, relPath);
    return;
  }
  if (stat.isSymbolicLink()) throw refuse(relPath, `${dir} is a symlink`);
  if (!stat.isDirectory()) throw refuse(relPath, `${dir} is not a directory`);
}

function refuse(relPath: string, why: string): GroveError {
  return new GroveError('invalid_input', `refusing to write ${JSON.stringify(relPath)}: ${why}`);
}

/**
 * writeWorkspaceFile as the agent's user. The backend (root in the sandbox, without CAP_DAC_OVERRIDE) can neither
 * write the agent's worktree nor should it own what the agent's tools make: a child of this very bundle, started
 * as `user` (the kernel clears its capabilities on that setuid), does the write and answers one JSON line.
 * Without a user it writes in-process (the backend's tests, a backend run outside a sandbox).
 */
export async function writeWorkspaceFileAs(
  user: AgentUser | null,
  args: { workspaceDir: string; relPath: string; content: string; entry?: string },
): Promise<{ bytes: number }> {
  if (!user) return writeWorkspaceFile(args);
  checkRelativePath(args.relPath);
  const entry = args.entry ?? process.argv[1];
  if (!entry) throw new GroveError('internal', 'cannot find the backend bundle to write as the agent');
  const out = await new Promise<string>((resolvePromise, reject) => {
    const child: ChildProcessByStdio<Writable, Readable, null> = spawn(process.execPath, [entry, WRITE_FILE_ARG, args.workspaceDir, args.relPath], {
      uid: user.uid,
      gid: user.gid,
      cwd: args.workspaceDir,
      env: {} as NodeJS.ProcessEnv,
      stdio: ['pipe', 'pipe', 'ignore'],
      timeout: CHILD_DEADLINE_MS,
    });
    let text = '';
    child.stdout.on('data', (b: Buffer) => {
      if (text.length < MAX_CHILD_OUTPUT) text += b.toString('utf8');
    });
    child.stdin.on('error', () => undefined);
    child.on('error', reject);
    child.on('close', () => resolvePromise(text));
    child.stdin.end(args.content);
  });
  let answer: { bytes?: unknown; error?: unknown };
  try {
    answer = JSON.parse(out) as typeof answer;
  } catch {
    throw new GroveError('internal', `the agent-side writer for ${JSON.stringify(args.relPath)} gave no answer`);
  }
  if (typeof answer.bytes === 'number') return { bytes: answer.bytes };
  throw new GroveError('invalid_input', typeof answer.error === 'string' ? answer.error : `could not write ${JSON.stringify(args.relPath)}`);
}

/** The child side of writeWorkspaceFileAs: argv is [workspaceDir, relPath]; the content comes on stdin. */
export async function writeWorkspaceFileMain(argv: readonly string[], stdin: NodeJS.ReadableStream): Promise<string> {
  const [workspaceDir, relPath] = argv;
  if (!workspaceDir || relPath === undefined) return JSON.stringify({ error: 'usage: <workspaceDir> <relPath>' });
  const chunks: Buffer[] = [];
  for await (const c of stdin) chunks.push(typeof c === 'string' ? Buffer.from(c) : (c as Buffer));
  try {
    const { bytes } = await writeWorkspaceFile({ workspaceDir, relPath, content: Buffer.concat(chunks).toString('utf8') });
    return JSON.stringify({ bytes });
  } catch (err) {
    return JSON.stringify({ error: err instanceof Error ? err.message : String(err) });
  }
}
