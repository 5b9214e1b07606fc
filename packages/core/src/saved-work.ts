/**
 * Saved work (docs/git-flow.md): what a worktree holds beyond its branch, saved to the slug's recovery refs
 * before anything removes it; listing those refs, the base a restore forks from, and what a teardown would keep.
 */
import { existsSync } from 'node:fs';
import { GroveError, TEARDOWN_PREVIEW_MAX_FILES, parseOrThrow, parseSlug, recoveryRefPrefix, restoreRequestSchema, workspaceNameSchema } from '@grove/contracts';
import type { ForkRequest, RestoreRequest, TeardownPreview } from '@grove/contracts';
import { notFound, requireAny, requireProject } from './context.ts';
import type { GroveContext } from './context.ts';
import { commitsBeyond } from './git.ts';
import { exportCommit, listRecoveryRefs, pendingWork, restoreRef, saveWork } from './git-store.ts';
import type { RecoveryRefEntry, SavedWork } from './git-store.ts';
import { validSlug } from './paths.ts';

/** The workspace (or the leftover worktree) whose work is saved; `parent` overrides the branch it is saved on top of. */
export interface SaveTarget {
  slug: string;
  project: string;
  name: string;
  id?: number;
  branch?: string;
  parent?: string | null;
}

/**
 * Save what a worktree holds beyond its branch (or `parent`) to the slug's next recovery ref before it is
 * removed, and record it (workspace.saved). Call under the project's repository lock. Throws when the work
 * cannot be saved, so the caller keeps the worktree: removing it then would lose the work.
 */
export async function saveBeforeRemoval(ctx: GroveContext, w: SaveTarget, reason: string): Promise<SavedWork | null> {
  const parent = w.parent !== undefined ? w.parent : w.branch ? `refs/heads/${w.branch}` : null;
  const saved = await saveWork(ctx.paths.repo(w.project), {
    slug: w.slug,
    objects: ctx.paths.workspaceObjects(w.slug),
    worktree: ctx.paths.worktree(w.project, w.name),
    parent,
    message: `grove: uncommitted work of ${w.slug}, saved before ${reason}\n\nRestore it as a new workspace: POST /api/workspaces/${w.slug}/restore {"name": "..."}\n`,
  });
  if (saved?.embedded.length) ctx.log.warn({ slug: w.slug, embedded: saved.embedded }, `saved work of ${w.slug} leaves out embedded repositories (never entered): ${saved.embedded.join(', ')}`);
  if (saved) {
    await ctx.emit(w.slug, 'workspace.saved', { ...(w.id === undefined ? {} : { workspaceId: w.id }), reason, ref: saved.ref, commit: saved.commit, reused: saved.reused });
  }
  return saved;
}

/** The recovery refs of a slug (live or gone), oldest first. */
export async function savedWork(ctx: GroveContext, slug: string): Promise<Array<{ ref: string; n: number; commit: string }>> {
  validSlug(slug);
  const { project } = parseSlug(slug);
  await requireProject(ctx, project);
  return ctx.lock.withLock(project, () => listRecoveryRefs(ctx.paths.repo(project), slug, ctx.paths.workspaceObjects(slug)));
}

/** The fork that restores saved work of slug (the newest, or number req.n) as a new workspace named req.name. */
export async function restoreRequest(ctx: GroveContext, slug: string, input: RestoreRequest): Promise<ForkRequest> {
  validSlug(slug);
  parseOrThrow(workspaceNameSchema, (input as { name?: unknown } | null)?.name, { what: 'workspace name', code: 'invalid_name' });
  const req = parseOrThrow(restoreRequestSchema, input, { what: 'restore request' });
  const { project } = parseSlug(slug);
  await requireProject(ctx, project);
  const saved = await ctx.lock.withLock(project, () => listRecoveryRefs(ctx.paths.repo(project), slug, ctx.paths.workspaceObjects(slug)));
  const pick: RecoveryRefEntry | undefined = req.n === undefined ? saved.at(-1) : saved.find((r) => r.n === req.n);
  if (!pick) {
    const which = req.n === undefined ? 'no saved work' : `no saved work number ${req.n}`;
    throw new GroveError('not_found', `workspace "${slug}" has ${which} to restore (nothing under ${recoveryRefPrefix(slug)})`, {
      details: { slug, saved: saved.map((r) => r.n) },
    });
  }
  return { project, name: req.name, from: pick.ref };
}

/**
 * The base of a fork from saved work: the recovery commit (in the saved workspace's private store) copied into
 * the primary under refs/grove-restore/<project>/<name>/<n>, since the new branch starts there and is shared
 * work from then on. That ref is never moved, so it keeps naming this commit (readable in events and the row).
 */
export async function savedWorkBase(ctx: GroveContext, project: string, saved: { slug: string; n: number }): Promise<string> {
  if (parseSlug(saved.slug).project !== project) {
    throw new GroveError('invalid_input', `saved work of "${saved.slug}" belongs to another project than "${project}"`, { details: { slug: saved.slug, project } });
  }
  const repo = ctx.paths.repo(project);
  const objects = ctx.paths.workspaceObjects(saved.slug);
  return ctx.lock.withLock(project, async () => {
    const pick = (await listRecoveryRefs(repo, saved.slug, objects)).find((r) => r.n === saved.n);
    if (!pick) throw new GroveError('not_found', `workspace "${saved.slug}" has no saved work number ${saved.n}`, { details: { slug: saved.slug, n: saved.n } });
    const ref = restoreRef(saved.slug, saved.n);
    await exportCommit(repo, objects, { commit: pick.commit, ref });
    return ref;
  });
}

/** What a teardown of slug would keep and remove, read now (the confirmation dialog asks before it tears down). */
export async function teardownPreview(ctx: GroveContext, slug: string): Promise<TeardownPreview> {
  const row = await requireAny(ctx, slug);
  if (row.state === 'gone') throw notFound(slug);
  const repo = ctx.paths.repo(row.project);
  const worktree = ctx.paths.worktree(row.project, row.name);
  // Under the repository lock, like the save itself: the snapshot's temporary index and objects stay out of a git write's way.
  const pending = await ctx.lock.withLock(row.project, () =>
    pendingWork(repo, { slug, objects: ctx.paths.workspaceObjects(slug), worktree, parent: `refs/heads/${row.branch}`, limit: TEARDOWN_PREVIEW_MAX_FILES }),
  );
  return {
    slug,
    branch: row.branch,
    baseRef: row.baseRef,
    commitsAhead: await commitsBeyond(repo, row.branch, row.baseRef),
    uncommitted: { total: pending.total, files: pending.files },
    recoveryRef: pending.ref,
    removes: { sandbox: row.containerId !== null || row.state === 'running' || row.state === 'stopped', worktree: existsSync(worktree) },
  };
}
