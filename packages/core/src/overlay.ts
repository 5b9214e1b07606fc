import { createHash } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import { chown, lstat, mkdir, open, readdir, readFile, realpath, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { DEFAULT_OVERLAY_FILES, OVERLAY_MAX_BYTES, overlayPathProblem } from '@grove/contracts';
import type { ProjectConfig } from '@grove/contracts';
import { execGit } from './git-exec.ts';

/**
 * The config-parity overlay (docs/git-flow.md): the user's local files a workspace needs but git does not carry.
 * They live in <home>/overlays/<project>/<path>; each workspace gets the read-only ones as bind mounts and the
 * writable ones as copies made at fork. Snapshots drop every overlay path (git.ts, dropOverlayEntries).
 */

/** A project holds at most this many overlay files (each at most OVERLAY_MAX_BYTES). */
export const OVERLAY_MAX_FILES = 64;

export interface OverlaySettings {
  files: readonly string[];
  writable: readonly string[];
}

export function overlaySettings(config: ProjectConfig): OverlaySettings {
  return { files: config.overlay?.files ?? DEFAULT_OVERLAY_FILES, writable: config.overlay?.writable ?? [] };
}

function globRegExp(glob: string): RegExp {
  // Entries are validated (overlayPathProblem): only * and ? are special, and only in the last segment.
  const body = glob.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]');
  return new RegExp(`^${body}$`);
}

/** Whether a repository-relative path is named by any of the globs. */
export function matchesAny(globs: readonly string[], path: string): boolean {
  return globs.some((g) => globRegExp(g).test(path));
}

export interface OverlayFile {
  /** Repository-relative path. */
  path: string;
  /** Host file in the project's overlay dir. */
  hostPath: string;
  writable: boolean;
}

/** The overlay dir's regular files that the config still names (symlinks and anything else are skipped). */
export async function listOverlay(dir: string, settings: OverlaySettings): Promise<OverlayFile[]> {
  const out: OverlayFile[] = [];
  const walk = async (rel: string): Promise<void> => {
    const entries = await readdir(join(dir, rel), { withFileTypes: true }).catch(() => []);
    for (const e of entries) {
      const path = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) await walk(path);
      // A .grove-tmp file is a write a crash interrupted, never an overlay file.
      else if (e.isFile() && !e.name.endsWith('.grove-tmp') && overlayPathProblem(path, { glob: false }) === null && matchesAny(settings.files, path)) {
        out.push({ path, hostPath: join(dir, ...path.split('/')), writable: matchesAny(settings.writable, path) });
      }
    }
  };
  await walk('');
  return out.sort((a, b) => a.path.localeCompare(b.path)).slice(0, OVERLAY_MAX_FILES);
}

/** Candidate paths in a checkout for one glob: the path itself, or the regular files of its directory that match. */
async function candidates(root: string, glob: string): Promise<string[]> {
  if (!/[*?]/.test(glob)) return [glob];
  const parent = glob.includes('/') ? glob.slice(0, glob.lastIndexOf('/')) : '';
  const entries = await readdir(join(root, ...parent.split('/').filter(Boolean)), { withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isFile()).map((e) => (parent ? `${parent}/${e.name}` : e.name)).filter((p) => globRegExp(glob).test(p));
}

/** git against the bare clone with no user or system config; '' when it fails (a path HEAD does not have). */
async function gitIn(repo: string, args: string[]): Promise<string> {
  const r = await execGit({ gitDir: repo, args }).catch(() => null);
  return r && r.code === 0 && !r.timedOut && !r.overflow ? r.stdout.toString('utf8').trim() : '';
}

/** The blob id git would give content, in the repository's object format. */
function blobId(content: Buffer, format: string): string {
  return createHash(format === 'sha256' ? 'sha256' : 'sha1')
    .update(`blob ${content.length}\0`)
    .update(content)
    .digest('hex');
}

export interface CaptureResult {
  captured: string[];
  /** Matching files left out, with why (a symlink, too big, ...). */
  skipped: Array<{ path: string; reason: string }>;
}

/**
 * Copy the overlay files of a local checkout into dir: those the globs name that exist there as regular files
 * inside the checkout and that git does not carry as they are, i.e. not in the clone's HEAD with this content
 * (a tracked .mcp.json is taken only when it is modified locally). git never runs in the checkout: its config
 * and hooks are the user's, and the clone in repo answers what HEAD holds.
 */
export async function captureOverlay(o: { checkout: string; repo: string; dir: string; settings: OverlaySettings }): Promise<CaptureResult> {
  const result: CaptureResult = { captured: [], skipped: [] };
  const root = await realpath(o.checkout).catch(() => null);
  if (!root) return result;
  const format = (await gitIn(o.repo, ['rev-parse', '--show-object-format'])) || 'sha1';
  const seen = new Set<string>();
  for (const glob of o.settings.files) {
    for (const path of await candidates(root, glob)) {
      if (seen.has(path) || overlayPathProblem(path, { glob: false }) !== null) continue;
      seen.add(path);
      const file = join(root, ...path.split('/'));
      const st = await lstat(file).catch(() => null);
      if (!st) continue;
      if (!st.isFile()) {
        result.skipped.push({ path, reason: st.isSymbolicLink() ? 'a symbolic link' : 'not a regular file' });
        continue;
      }
      // A symlinked parent directory could lead out of the checkout.
      const real = await realpath(file).catch(() => '');
      const rel = relative(root, real);
      if (!real || rel.startsWith(`..${sep}`) || rel === '..' || rel.split(sep).join('/') !== path) {
        result.skipped.push({ path, reason: 'outside the checkout' });
        continue;
      }
      if (st.size > OVERLAY_MAX_BYTES) {
        result.skipped.push({ path, reason: `larger than ${OVERLAY_MAX_BYTES} bytes` });
        continue;
      }
      if (result.captured.length >= OVERLAY_MAX_FILES) {
        result.skipped.push({ path, reason: `more than ${OVERLAY_MAX_FILES} files` });
        continue;
      }
      const content = await readFile(file);
      const tracked = await gitIn(o.repo, ['rev-parse', '--verify', '--quiet', `HEAD:${path}`]);
      if (tracked && tracked === blobId(content, format)) continue; // git carries it as it is
      await writeOverlayFile(o.dir, path, content);
      result.captured.push(path);
    }
  }
  return result;
}

/** Write one overlay file (path validated by the caller) atomically into dir. */
export async function writeOverlayFile(dir: string, path: string, content: Buffer | string): Promise<void> {
  const target = join(dir, ...path.split('/'));
  await mkdir(dirname(target), { recursive: true, mode: 0o700 });
  const tmp = `${target}.grove-tmp`;
  await writeFile(tmp, content, { mode: 0o644 });
  await rename(tmp, target);
}

/**
 * Make sure every directory on the way to worktree/<path> is a real directory (created as owner when missing)
 * and return the target, or null when a component is a symlink or not a directory: the branch's content (or
 * the sandbox, in an earlier run) decides what is there, and the host must never follow a link out of it.
 */
async function safeTarget(worktree: string, path: string, owner: { uid: number; gid: number } | null): Promise<string | null> {
  const parts = path.split('/');
  let cur = worktree;
  for (const part of parts.slice(0, -1)) {
    cur = join(cur, part);
    const st = await lstat(cur).catch(() => null);
    if (!st) {
      await mkdir(cur);
      if (owner) await chown(cur, owner.uid, owner.gid);
    } else if (!st.isDirectory()) return null;
  }
  const target = join(cur, parts.at(-1) ?? '');
  const st = await lstat(target).catch(() => null);
  if (st && !st.isFile()) return null;
  return target;
}

/**
 * Copy the writable overlay files into a fresh worktree, owned by the sandbox user; never through a symlink
 * (O_NOFOLLOW on the file, safeTarget for its directories). Returns the paths it could not place.
 */
export async function copyWritable(files: readonly OverlayFile[], worktree: string, owner: { uid: number; gid: number } | null): Promise<string[]> {
  const refused: string[] = [];
  for (const f of files.filter((x) => x.writable)) {
    const target = await safeTarget(worktree, f.path, owner);
    if (!target) {
      refused.push(f.path);
      continue;
    }
    const content = await readFile(f.hostPath);
    // O_NONBLOCK: a FIFO planted there fails at once instead of blocking the host.
    const fh = await open(target, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK, 0o644).catch(() => null);
    if (!fh) {
      refused.push(f.path);
      continue;
    }
    try {
      await fh.writeFile(content);
      if (owner) await fh.chown(owner.uid, owner.gid);
    } finally {
      await fh.close();
    }
  }
  return refused;
}

/**
 * Mount points for the read-only overlay files: an empty file where the worktree has none, made by the host so
 * Docker does not create it (and its directories) as root. The placeholder is an overlay path, so no snapshot
 * carries it; it goes with the worktree. Returns the files that can be mounted and the paths refused.
 */
export async function prepareMountTargets(
  files: readonly OverlayFile[],
  worktree: string,
  owner: { uid: number; gid: number } | null,
): Promise<{ mounts: OverlayFile[]; refused: string[] }> {
  const mounts: OverlayFile[] = [];
  const refused: string[] = [];
  for (const f of files.filter((x) => !x.writable)) {
    const target = await safeTarget(worktree, f.path, owner);
    if (!target) {
      refused.push(f.path);
      continue;
    }
    const fh = await open(target, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK, 0o644).catch(() => null);
    if (!fh) {
      refused.push(f.path);
      continue;
    }
    await fh.close();
    mounts.push(f);
  }
  return { mounts, refused };
}

/** Remove one overlay file (path validated by the caller); no error when absent. */
export async function removeOverlayFile(dir: string, path: string): Promise<void> {
  await rm(join(dir, ...path.split('/')), { force: true });
}
