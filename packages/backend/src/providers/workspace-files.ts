import { constants } from 'node:fs';
import { lstat, mkdir, open, realpath } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { GroveError } from '@grove/contracts';

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
