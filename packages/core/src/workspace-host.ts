/**
 * The host side of a workspace that the lifecycle prepares before the runtime starts it: its run, thread and
 * state dirs, the sandbox's own git dir, the archive of what an earlier workspace of the slug left, the disk
 * image's targets, the runtime-neutral spec the runtime is handed, and the backend's /status once it runs.
 */
import { existsSync } from 'node:fs';
import { chmod, mkdir } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { ProjectConfig } from '@grove/contracts';
import type { WorkspaceRow } from '@grove/db';
import { BACKEND_GID, BACKEND_UID, SANDBOX_GID, SANDBOX_UID, getOverSocket } from '@grove/runtime';
import type { WorkspaceSpec } from '@grove/runtime';
import { agentSandboxEnv } from './agents.ts';
import type { GroveContext } from './context.ts';
import * as egressPolicy from './egress-policy.ts';
import { canChown, ensureDirs, isNonEmptyDir, moveInto, reclaimTrees, removeDir } from './fsutil.ts';
import { prepareMountTargets } from './overlay.ts';
import * as projects from './projects.ts';
import { ensureSandboxGitDir } from './sandbox-git.ts';
import type { VolumeTargets } from './volume.ts';

/** The agent's user: owner of the worktree, the state dir and the sandbox git dir. */
export const OWNER = { uid: SANDBOX_UID, gid: SANDBOX_GID };
/** The backend's user (root in the container): owner of the run and thread dirs and of every host socket there. */
const BACKEND = { uid: BACKEND_UID, gid: BACKEND_GID };

/** OWNER when this process may hand files to it (root), else null. */
export function owner(): typeof OWNER | null {
  return canChown() ? OWNER : null;
}

/** The host paths the disk image's dirs are bound onto: where the rest of Grove (and Docker) finds them. */
export function volumeTargets(ctx: GroveContext, row: { slug: string; project: string; name: string }): VolumeTargets {
  return { worktree: ctx.paths.worktree(row.project, row.name), state: ctx.paths.state(row.slug), git: ctx.paths.sandboxGit(row.slug) };
}

export async function prepareDirs(ctx: GroveContext, slug: string, o: { fresh: boolean }): Promise<void> {
  // A new workspace never inherits a thread or agent state left under its slug by an earlier one.
  if (o.fresh) await archive(ctx, slug, ['thread', 'state']);
  await ensureDirs([ctx.paths.state(slug)], OWNER);
  // The backend's: the agent's user can neither list nor change them (its socket, the host's sockets, the
  // thread). chown -R also takes back what an earlier version let the agent's user own there.
  const backendDirs = [ctx.paths.run(slug), ctx.paths.thread(slug)];
  await ensureDirs(backendDirs);
  if (!canChown()) return;
  await reclaimTrees(backendDirs, BACKEND);
  for (const d of backendDirs) await chmod(d, 0o700);
}

/** The sandbox's own git dir and the worktree's .git file naming it (sandbox-git.ts). Under the repository lock. */
export async function prepareSandboxGit(ctx: GroveContext, row: WorkspaceRow, hostAdminDir: string, o: { fresh: boolean }): Promise<void> {
  const { paths, volumes } = ctx;
  // The host's admin dir is the host's alone from now on (an earlier version handed it to the agent's user).
  await reclaimTrees([hostAdminDir], BACKEND);
  await mkdir(paths.sandboxGitRoot, { recursive: true, mode: 0o755 });
  await ensureSandboxGitDir({
    dir: paths.sandboxGit(row.slug),
    worktree: paths.worktree(row.project, row.name),
    branch: row.branch,
    hostAdminDir,
    // Files are renamed into the git dir, and rename cannot cross mounts: when the dir is bound from the disk
    // image, they are made in it (random name, O_EXCL|O_NOFOLLOW, as for the worktree's .git; no sandbox runs now).
    scratch: volumes && (await volumes.mounted(row.slug)) ? paths.sandboxGit(row.slug) : paths.scratchRoot,
    owner: owner(),
    fresh: o.fresh,
  });
}

/**
 * Move the non-empty ones of the slug's thread/state dirs to <archive>/<slug>-<ts>/<kind> and delete empty
 * ones. Returns the archive's name (not its host path) or null when nothing was kept.
 */
export async function archive(ctx: GroveContext, slug: string, kinds: Array<'thread' | 'state'>): Promise<string | null> {
  const { paths } = ctx;
  let dest: string | null = null;
  for (const kind of kinds) {
    const src = kind === 'thread' ? paths.thread(slug) : paths.state(slug);
    if (!(await isNonEmptyDir(src))) {
      await removeDir(src);
      continue;
    }
    if (!dest) {
      let at = Date.now();
      dest = paths.archiveFor(slug, new Date(at));
      while (existsSync(dest)) dest = paths.archiveFor(slug, new Date(++at));
      await mkdir(dest, { recursive: true });
    }
    await moveInto(src, join(dest, kind));
  }
  return dest ? basename(dest) : null;
}

/** The backend's env from the config; the runtime adds its proxy variables and the identity (GROVE_SLUG, GROVE_PROJECT) after these. */
export function sandboxEnv(ctx: GroveContext, config: ProjectConfig): Record<string, string> {
  return { GROVE_PROVIDER: 'scripted', ...ctx.opts.sandboxEnv, ...agentSandboxEnv(config) };
}

/**
 * What the runtime is asked to run: the host dirs, the env, the overlay files (their targets made here) and the
 * policy, all from the one config the caller read for this operation.
 */
export async function spec(ctx: GroveContext, row: WorkspaceRow, config: ProjectConfig): Promise<WorkspaceSpec> {
  const { paths } = ctx;
  const worktree = paths.worktree(row.project, row.name);
  const { mounts, refused } = await ctx.lock.withLock(row.project, async () =>
    prepareMountTargets(await projects.currentOverlay(ctx, row.project, config), worktree, owner()),
  );
  if (refused.length) ctx.log.warn({ slug: row.slug, refused }, 'overlay files not mounted: a symlink or a non-directory is in the way');
  return {
    slug: row.slug,
    project: row.project,
    worktreePath: worktree,
    sandboxGitDir: paths.sandboxGit(row.slug),
    gitCommonDir: paths.repo(row.project),
    threadDir: paths.thread(row.slug),
    stateDir: paths.state(row.slug),
    env: sandboxEnv(ctx, config),
    limits: ctx.limits,
    overlay: mounts.map((m) => ({ hostPath: m.hostPath, path: m.path })),
    egressPolicy: await egressPolicy.policyOf(ctx, row, config),
  };
}

/** The backend's /status (a turn in progress, its agent session), or null when it does not answer 200 in a second. */
export async function backendStatus(ctx: GroveContext, slug: string): Promise<{ busy?: unknown; agentSessionId?: unknown } | null> {
  try {
    const { status, body } = await getOverSocket(ctx.paths.socket(slug), '/status', 1_000);
    return status === 200 ? ((body as { busy?: unknown; agentSessionId?: unknown } | null) ?? null) : null;
  } catch {
    return null;
  }
}
