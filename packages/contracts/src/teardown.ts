import { z } from 'zod';

/**
 * GET /api/workspaces/:slug/teardown-preview: what a teardown would keep and remove, read on the host
 * right now (issue 8). The uncommitted part is computed the way teardown saves it (the worktree's
 * content against the branch tip: changes staged or not, untracked files that are not ignored), so the
 * confirmation says what the recovery ref will hold, not a guess.
 */
export const pendingChangeSchema = z.object({
  status: z.enum(['added', 'modified', 'deleted', 'type-changed']),
  path: z.string(),
});
export type PendingChange = z.infer<typeof pendingChangeSchema>;

/** At most this many paths are listed; `total` still counts them all. */
export const TEARDOWN_PREVIEW_MAX_FILES = 50;

export const teardownPreviewSchema = z.object({
  slug: z.string(),
  /** Kept: teardown never deletes the branch. */
  branch: z.string(),
  baseRef: z.string(),
  /** Commits on the branch that its base does not contain (null when either cannot be resolved). */
  commitsAhead: z.number().int().nonnegative().nullable(),
  uncommitted: z.object({
    total: z.number().int().nonnegative(),
    files: z.array(pendingChangeSchema).max(TEARDOWN_PREVIEW_MAX_FILES),
  }),
  /** The recovery ref the uncommitted work would be saved to; null when there is nothing to save. */
  recoveryRef: z.string().nullable(),
  /** Removed: the sandbox (container) and the checkout (worktree); the thread is archived. */
  removes: z.object({ sandbox: z.boolean(), worktree: z.boolean() }),
});
export type TeardownPreview = z.infer<typeof teardownPreviewSchema>;
