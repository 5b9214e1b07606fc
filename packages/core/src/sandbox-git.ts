import { constants } from 'node:fs';
import { lstat, mkdir, open, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { SANDBOX_PATHS } from '@grove/runtime';
import { readRegularFile, replaceFile } from './fsutil.ts';

/**
 * The sandbox's own git dir (DESIGN.md section 5). Inside the container /workspace/.git says
 * `gitdir: /grove/git`, a read-write mount of <home>/sandbox-git/<slug> holding HEAD, index and a commondir
 * that names the read-only primary at /grove/common. The host's admin dir of the worktree
 * (<repo>/worktrees/<id>) is never mounted: host git (`worktree list`, `fetch`, `worktree add`) reads every
 * admin dir of the project, so none of them may be something an agent can write (a FIFO as HEAD stalled them
 * all). Host git never reads this dir either; it passes GIT_DIR and GIT_WORK_TREE explicitly.
 */
export interface SandboxGitOptions {
  /** paths.sandboxGit(slug): root-owned parent, so the agent cannot replace the directory itself. */
  dir: string;
  /** The worktree whose .git file must name SANDBOX_PATHS.gitDir. */
  worktree: string;
  branch: string;
  /** The host's admin dir: its index (written by `git worktree add`) seeds the sandbox's on a fresh fork. */
  hostAdminDir: string;
  /** Host-only scratch dir on the same filesystem as dir (paths.scratchRoot). */
  scratch: string;
  /** The agent's user, when the host may chown. */
  owner: { uid: number; gid: number } | null;
  /** A new workspace: HEAD and index are written even when present. */
  fresh: boolean;
}

/** What /workspace/.git holds. */
export const WORKTREE_GITFILE = `gitdir: ${SANDBOX_PATHS.gitDir}\n`;
/** The largest index the host copies into a sandbox git dir (a checkout of ~1M files). */
const MAX_INDEX_BYTES = 256 << 20;

export async function ensureSandboxGitDir(o: SandboxGitOptions): Promise<{ gitfileReplaced: boolean }> {
  await mkdir(o.scratch, { recursive: true, mode: 0o700 });
  await ensureRealDir(o.dir);
  // content null: nothing to write (git reads a missing index as an empty one; a 0-byte file it refuses).
  const files: Array<[name: string, content: () => Promise<Buffer | null>, always: boolean]> = [
    ['commondir', async () => Buffer.from(`${SANDBOX_PATHS.gitCommon}\n`), true],
    ['gitdir', async () => Buffer.from(`${SANDBOX_PATHS.workspace}/.git\n`), true],
    ['HEAD', async () => Buffer.from(`ref: refs/heads/${o.branch}\n`), o.fresh],
    ['index', () => readRegularFile(join(o.hostAdminDir, 'index'), MAX_INDEX_BYTES), o.fresh],
  ];
  for (const [name, content, always] of files) {
    const target = join(o.dir, name);
    if (!always && (await isRegular(target))) continue;
    const bytes = await content();
    if (bytes) await replaceFile({ target, tmpDir: o.scratch, content: bytes, owner: o.owner });
  }
  if (o.owner) {
    const dir = await open(o.dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    try {
      await dir.chown(o.owner.uid, o.owner.gid);
    } finally {
      await dir.close();
    }
  }
  return { gitfileReplaced: await writeGitfile(o.worktree, o.owner) };
}

/**
 * /workspace/.git -> SANDBOX_PATHS.gitDir. `git worktree add` wrote the host's admin path there; the file is the
 * agent's, and nothing on the host reads it. A directory there (the agent made the worktree a repository of its
 * own) is left alone: returns false.
 */
async function writeGitfile(worktree: string, owner: { uid: number; gid: number } | null): Promise<boolean> {
  const target = join(worktree, '.git');
  const st = await lstat(target).catch(() => null);
  if (st?.isDirectory()) return false;
  // Written beside the target (the worktree may be another filesystem), under a name the agent cannot guess,
  // with O_EXCL|O_NOFOLLOW, then renamed over whatever .git is (a symlink is replaced, never followed).
  await replaceFile({ target, tmpDir: worktree, content: Buffer.from(WORKTREE_GITFILE), owner });
  return true;
}

async function ensureRealDir(dir: string): Promise<void> {
  const st = await lstat(dir).catch(() => null);
  if (st?.isDirectory()) return;
  if (st) await rm(dir, { force: true, recursive: true });
  await mkdir(dir, { mode: 0o755 });
}

async function isRegular(path: string): Promise<boolean> {
  const st = await lstat(path).catch(() => null);
  return st?.isFile() ?? false;
}
