import { z } from 'zod';
import { RECOVERY_REF_PATTERN, projectNameSchema, workspaceNameSchema, slugSchema } from './names.ts';
import { pullRequestSchema } from './git-flow.ts';

export const workspaceStateSchema = z.enum(['creating', 'running', 'stopped', 'tearing-down', 'gone', 'failed']);
export type WorkspaceState = z.infer<typeof workspaceStateSchema>;

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
  /** The pull request publish opened for this workspace's branch (docs/git-flow.md); null or absent: none. */
  pullRequest: pullRequestSchema.nullable().optional(),
});
export type Workspace = z.infer<typeof workspaceSchema>;

export const capacitySchema = z.object({
  running: z.number().int().nonnegative(),
  creating: z.number().int().nonnegative(),
  cap: z.number().int().positive(),
});
export type Capacity = z.infer<typeof capacitySchema>;

export const projectSchema = z.object({
  name: z.string(),
  defaultBranch: z.string(),
  createdAt: z.string(),
});
export type Project = z.infer<typeof projectSchema>;

/** Audit-trail event types (DESIGN.md section 3). Open-ended on read, closed on write in core. */
export const eventTypeSchema = z.enum([
  'workspace.reserved',
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
  })
  .strict();
export type ForkRequest = z.infer<typeof forkRequestSchema>;

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
