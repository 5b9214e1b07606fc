import { z } from 'zod';
import { RECOVERY_REF_PATTERN, projectNameSchema, workspaceNameSchema, slugSchema } from './names.ts';
import { pullRequestSchema } from './git-flow.ts';

/** `queued`: waiting in line for a sandbox slot (it holds its slug, not a slot); see DESIGN.md section 3. */
export const workspaceStateSchema = z.enum(['queued', 'creating', 'running', 'stopped', 'tearing-down', 'gone', 'failed']);
export type WorkspaceState = z.infer<typeof workspaceStateSchema>;

/**
 * A workspace's disk quota and what of it is used (statfs of its filesystem image, which holds the worktree and
 * the agent's state dir). Absent or null: no quota applies (Grove not running as root, or a workspace forked
 * before quotas), or its filesystem is not mounted right now.
 */
export const diskUsageSchema = z.object({
  usedBytes: z.number().int().nonnegative(),
  totalBytes: z.number().int().positive(),
  usedInodes: z.number().int().nonnegative(),
  totalInodes: z.number().int().positive(),
});
export type DiskUsage = z.infer<typeof diskUsageSchema>;

/** From this share of bytes or inodes used, the card warns. */
export const DISK_WARN_RATIO = 0.9;
/**
 * Full: less than this left (or DISK_FULL_SLACK_RATIO of the total, if more). ext4 answers ENOSPC a little before
 * its last block is handed out (block reservations for a write in flight, metadata), so "100%" is "almost nothing
 * left", not zero: a 32 MiB image refused a write with 1.2 MiB still free.
 */
export const DISK_FULL_SLACK_BYTES = 4 * 1024 * 1024;
export const DISK_FULL_SLACK_RATIO = 0.005;

/** ok, warn (>= 90% of bytes or inodes), full (no room for another file, or no inode left). */
export function diskLevel(d: DiskUsage): { level: 'ok' | 'warn' | 'full'; by: 'bytes' | 'inodes' | null } {
  if (d.totalBytes - d.usedBytes < Math.max(DISK_FULL_SLACK_BYTES, d.totalBytes * DISK_FULL_SLACK_RATIO)) return { level: 'full', by: 'bytes' };
  if (d.usedInodes >= d.totalInodes) return { level: 'full', by: 'inodes' };
  if (d.usedBytes >= d.totalBytes * DISK_WARN_RATIO) return { level: 'warn', by: 'bytes' };
  if (d.usedInodes >= d.totalInodes * DISK_WARN_RATIO) return { level: 'warn', by: 'inodes' };
  return { level: 'ok', by: null };
}

export const workspaceSchema = z.object({
  slug: slugSchema,
  project: z.string(),
  name: z.string(),
  isDefault: z.boolean(),
  branch: z.string(),
  baseRef: z.string(),
  state: workspaceStateSchema,
  failureReason: z.string().nullable(),
  agentSessionId: z.string().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
  lastActivityAt: z.string().nullable(),
  /** 1-based place in the line for a sandbox slot while queued; null in every other state. */
  queuePosition: z.number().int().positive().nullable(),
  /** The pull request publish opened for this workspace's branch (docs/git-flow.md); null or absent: none. */
  pullRequest: pullRequestSchema.nullable().optional(),
  /**
   * Why the watcher kept the workspace after its pull request was merged or closed (e.g. "2 files changed
   * since"): work cleanup would have removed. null or absent: nothing holds it.
   */
  cleanupHeld: z.string().nullable().optional(),
  /** This workspace's keepCheckoutOnClose (overrides the project's); null or absent: the project decides. */
  keepCheckoutOnClose: z.boolean().nullable().optional(),
  /** Its disk quota and usage (diskUsageSchema); set by list and get, absent in the answers of lifecycle calls. */
  disk: diskUsageSchema.nullable().optional(),
});
export type Workspace = z.infer<typeof workspaceSchema>;

export const capacitySchema = z.object({
  running: z.number().int().nonnegative(),
  creating: z.number().int().nonnegative(),
  cap: z.number().int().positive(),
  /** Workspaces waiting in line for a slot (forks sent with queue: true while the cap was reached). */
  queued: z.number().int().nonnegative(),
  /**
   * Warm sandboxes ready for the next fork (GROVE_WARM_POOL). They count towards the cap only while no workspace
   * needs the slot: a fork claims one or makes it give way, so they never push a fork over the cap.
   */
  warm: z.number().int().nonnegative().optional(),
});
export type Capacity = z.infer<typeof capacitySchema>;

export const projectSchema = z.object({
  name: z.string(),
  defaultBranch: z.string(),
  createdAt: z.string(),
});
export type Project = z.infer<typeof projectSchema>;
/** POST /api/projects (201). */
export const projectResponseSchema = z.object({ project: projectSchema });
export type ProjectResponse = z.infer<typeof projectResponseSchema>;
/** GET /api/projects. */
export const listProjectsResponseSchema = z.object({ projects: z.array(projectSchema) });
export type ListProjectsResponse = z.infer<typeof listProjectsResponseSchema>;

/** Audit-trail event types (DESIGN.md section 3). Open-ended on read, closed on write in core. */
export const eventTypeSchema = z.enum([
  'workspace.reserved',
  /** A fork sent with queue: true found the cap reached (or a line ahead of it) and waits; data.position is its place. */
  'workspace.queued',
  /** A slot freed and the first in line was given it; its fork starts now. */
  'workspace.promoted',
  'workspace.prepared',
  'sandbox.started',
  'workspace.registered',
  'workspace.stopped',
  'workspace.started',
  'workspace.teardown',
  'workspace.cleaned',
  /** Uncommitted work was saved to a recovery ref before its worktree was removed. */
  'workspace.saved',
  'workspace.reconciled',
  'spawn_failed',
  /** A running sandbox died on its own (crash, OOM kill, docker kill); the workspace is now stopped with the reason. */
  'sandbox.died',
  /** The kernel killed a process in the sandbox at its memory limit; the sandbox itself may live on. */
  'sandbox.oom',
  /** After a turn, changes outside the project's allowed paths were reverted. */
  'turn.reverted',
  /** After a turn that changed files, the worktree was recorded on refs/grove/<slug>/turns/<n>. */
  'turn.snapshot',
  /** A turn ended (after the after-turn work): data is turnEndedDataSchema (outcome, short error, waiting for the user). */
  'turn.ended',
  /** POST /api/workspaces/:slug/undo restored the worktree to before a turn. */
  'workspace.undo',
  'egress.denied',
  'egress.allowed',
  /** The workspace's egress policy was changed through the API. */
  'egress.policy',
  /** The host committed the worktree onto the workspace's branch (docs/git-flow.md). */
  'workspace.checkpoint',
  /** Publish pushed the branch to the project's remote. */
  'workspace.pushed',
  /** Publish opened (or found) the workspace's pull request. */
  'workspace.published',
  /** Publish stopped part way; data says at which step, why, and what was undone. */
  'publish.failed',
  /** The primary clone could not be fetched before a fork; the fork went on from what was there. */
  'project.fetch_failed',
  /** A project was registered from a repository. */
  'project.added',
  /** The pull-request watcher saw the workspace's pull request change state; data says whether it cleans up. */
  'workspace.pr_state',
  /** The watcher kept a workspace whose pull request was merged or closed: data.reason says what it would have removed. */
  'workspace.kept',
  /** A fork could not start where it was asked to (a pull request's head); data says where it started instead and why. */
  'workspace.base_fallback',
  /**
   * The workspace's disk quota is used up (data.by: bytes or inodes, with the figures): the agent's writes fail
   * with ENOSPC until files are removed. Recorded once per crossing.
   */
  'workspace.disk_full',
]);
export type EventType = z.infer<typeof eventTypeSchema>;

export const eventSchema = z.object({
  id: z.number().int(),
  slug: z.string(),
  type: z.string(),
  data: z.record(z.string(), z.unknown()),
  at: z.string(),
});
export type GroveEvent = z.infer<typeof eventSchema>;

/**
 * data of a `workspace.base_fallback` event: the fork was asked to start at `wanted` ("pull request #7") and
 * started at `base` (the default branch) instead, for `reason`. Extra fields (workspaceId) are allowed.
 */
export const baseFallbackDataSchema = z.object({ wanted: z.string(), base: z.string(), reason: z.string() });
export type BaseFallbackData = z.infer<typeof baseFallbackDataSchema>;

/**
 * data of a `workspace.pr_state` event (the watcher saw the pull request change): `cleanup` says whether it decided to
 * tear the workspace down, `held` why it kept it instead (work a cleanup would remove). Extra fields are allowed.
 */
export const prStateDataSchema = z.object({
  number: z.number(),
  from: z.string(),
  to: z.enum(['open', 'closed', 'merged']),
  cleanup: z.boolean(),
  held: z.string().optional(),
});
export type PrStateData = z.infer<typeof prStateDataSchema>;

// ---- Registry API bodies ----

export const forkRequestSchema = z
  .object({
    project: projectNameSchema,
    name: workspaceNameSchema,
    from: z
      .string()
      .min(1)
      .max(200)
      .refine((s) => RECOVERY_REF_PATTERN.test(s) || /^[A-Za-z0-9._/-]+$/.test(s), {
        error: 'from must be a branch or commit name (letters, digits, . _ / -) or a recovery ref refs/grove/<slug>/teardown/<n>',
      })
      .refine((s) => !s.startsWith('-') && !s.includes('..'), { error: 'from must not start with "-" or contain ".."' })
      // Under refs/grove/ only the recovery refs are a base; anything else there is Grove's bookkeeping.
      .refine((s) => !s.startsWith('refs/grove/') || RECOVERY_REF_PATTERN.test(s), { error: 'from under refs/grove/ must be refs/grove/<slug>/teardown/<n>' })
      .optional(),
    /**
     * Start at this pull request's head (refs/pull/<n>/head on the project's remote, which GitHub and Gitea
     * serve); when it cannot be fetched the fork starts at the default branch and workspace.base_fallback says why.
     */
    pullRequest: z
      .number({ error: 'pull request must be a number, like 42' })
      .int({ error: 'pull request must be a whole number, like 42' })
      .positive({ error: 'pull request numbers start at 1' })
      .max(2_147_483_647, { error: 'pull request number is too large' })
      .optional(),
    /** Keep the checkout when the pull request is merged or closed, whatever the project says. */
    keepCheckoutOnClose: z.boolean().optional(),
    /**
     * When every sandbox slot is taken (or others already wait): wait in line (202, state queued, with its
     * position) instead of the 429 capacity_reached that stays the default.
     */
    queue: z.boolean().optional(),
  })
  .strict()
  .refine((r) => r.from === undefined || r.pullRequest === undefined, { error: 'give from or pullRequest, not both', path: ['pullRequest'] });
export type ForkRequest = z.infer<typeof forkRequestSchema>;

/** PATCH /api/workspaces/:slug: settings of one workspace. null resets keepCheckoutOnClose to the project's. */
export const updateWorkspaceRequestSchema = z.object({ keepCheckoutOnClose: z.boolean().nullable().optional() }).strict();
export type UpdateWorkspaceRequest = z.infer<typeof updateWorkspaceRequestSchema>;

/** POST /api/workspaces/:slug/start (body optional): with queue, a reopen at the cap waits in line (202) instead of 429. */
export const startRequestSchema = z.object({ queue: z.boolean().optional() }).strict();
export type StartRequest = z.infer<typeof startRequestSchema>;

/** POST /api/workspaces/:slug/restore: saved work of :slug (the newest, or number n) as a new workspace. */
export const restoreRequestSchema = z
  .object({
    name: workspaceNameSchema,
    n: z.number().int().positive().optional(),
  })
  .strict();
export type RestoreRequest = z.infer<typeof restoreRequestSchema>;

export const savedWorkSchema = z.object({ ref: z.string(), n: z.number().int().positive(), commit: z.string() });
export const savedWorkResponseSchema = z.object({ saved: z.array(savedWorkSchema) });
export type SavedWorkResponse = z.infer<typeof savedWorkResponseSchema>;

/**
 * GET /api/workspaces/:slug/last-message: the last thing said in the workspace's thread (by the user or the
 * agent, on one line, shortened), read by the host so it is there while the workspace is stopped.
 */
export const lastMessageSchema = z.object({ who: z.enum(['user', 'agent']), text: z.string(), at: z.string() });
export type LastMessage = z.infer<typeof lastMessageSchema>;
export const lastMessageResponseSchema = z.object({ lastMessage: lastMessageSchema.nullable() });
export type LastMessageResponse = z.infer<typeof lastMessageResponseSchema>;

/** How many messages GET /api/workspaces/:slug/recent-messages gives at most, and how long each may be. */
export const RECENT_MESSAGES = 20;
export const RECENT_MESSAGE_CHARS = 4000;
/**
 * GET /api/workspaces/:slug/recent-messages: the newest things said in the thread, oldest first, line breaks
 * kept, read by the host like last-message: the conversation to show while the workspace is stopped.
 */
export const recentMessagesResponseSchema = z.object({ messages: z.array(lastMessageSchema).max(RECENT_MESSAGES) });
export type RecentMessagesResponse = z.infer<typeof recentMessagesResponseSchema>;

export const listWorkspacesResponseSchema = z.object({
  workspaces: z.array(workspaceSchema),
  capacity: capacitySchema,
});
export type ListWorkspacesResponse = z.infer<typeof listWorkspacesResponseSchema>;

export const workspaceResponseSchema = z.object({ workspace: workspaceSchema });
export type WorkspaceResponse = z.infer<typeof workspaceResponseSchema>;

export const forkAcceptedResponseSchema = z.object({
  workspace: workspaceSchema,
  events: z.string().describe('URL of the audit trail for this workspace'),
});

/** 202 to a fork sent with queue: true that has to wait: the queued workspace and its place in line. */
export const forkQueuedResponseSchema = z.object({
  workspace: workspaceSchema.extend({ state: z.literal('queued'), queuePosition: z.number().int().positive() }),
  position: z.number().int().positive(),
  events: z.string().describe('URL of the audit trail for this workspace'),
});
export type ForkQueuedResponse = z.infer<typeof forkQueuedResponseSchema>;

export const eventsResponseSchema = z.object({ events: z.array(eventSchema) });
export type EventsResponse = z.infer<typeof eventsResponseSchema>;

export const eventsQuerySchema = z.object({
  slug: slugSchema.optional(),
  after: z.coerce.number().int().nonnegative().optional(),
  limit: z.coerce.number().int().min(1).max(1000).optional(),
  /** Only events of this type, e.g. `sandbox.oom`. */
  type: z.string().regex(/^[a-z_]+(\.[a-z_-]+)?$/, { error: 'type must look like workspace.stopped' }).optional(),
});

export const healthResponseSchema = z.object({ ok: z.literal(true) });
