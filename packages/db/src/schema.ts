/**
 * The registry schema. Kept dialect-portable in spirit (text timestamps as ISO strings, JSON as text,
 * no SQLite-only column types) so a Postgres schema can mirror it when DATABASE_URL arrives.
 */
import { sql } from 'drizzle-orm';
import { index, integer, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core';

export const projects = sqliteTable('projects', {
  name: text('name').primaryKey(),
  /** Where the bare primary clone came from (local path or URL). */
  source: text('source').notNull(),
  defaultBranch: text('default_branch').notNull(),
  createdAt: text('created_at').notNull(),
});

/** The states a row can hold; mirrors workspaceStateSchema in @grove/contracts. */
export type WorkspaceStateValue = 'queued' | 'creating' | 'running' | 'stopped' | 'tearing-down' | 'gone' | 'failed';

export const workspaces = sqliteTable(
  'workspaces',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    slug: text('slug').notNull(),
    project: text('project')
      .notNull()
      .references(() => projects.name),
    name: text('name').notNull(),
    isDefault: integer('is_default', { mode: 'boolean' }).notNull().default(false),
    branch: text('branch').notNull(),
    baseRef: text('base_ref').notNull(),
    state: text('state').$type<WorkspaceStateValue>().notNull(),
    failureReason: text('failure_reason'),
    containerId: text('container_id'),
    agentSessionId: text('agent_session_id'),
    worktreePath: text('worktree_path'),
    createdAt: text('created_at').notNull(),
    updatedAt: text('updated_at').notNull(),
    lastActivityAt: text('last_activity_at'),
    /**
     * The place in the line for a sandbox slot while the row is queued (smaller goes first; FIFO), null
     * otherwise. Stored, so the line keeps its order across a server restart.
     */
    queueSeq: integer('queue_seq'),
    /**
     * The workspace's egress policy ({rules: [{host, ports}]}, checked by egressPolicySchema in contracts);
     * null means the project default. Kept on the host only: never in a directory a sandbox mounts.
     */
    egressPolicy: text('egress_policy', { mode: 'json' }).$type<{ rules: Array<{ host: string; ports: number[] }> }>(),
    /** The pull request publish opened for the branch (docs/git-flow.md); all three null until then. */
    prUrl: text('pr_url'),
    prNumber: integer('pr_number'),
    prState: text('pr_state').$type<'open' | 'closed' | 'merged'>(),
    /**
     * Why the watcher kept this workspace after its pull request was merged or closed (work it would otherwise
     * remove: uncommitted files, commits after the merged head); null when nothing holds it.
     */
    cleanupHeld: text('cleanup_held'),
    /** Per-workspace override of the project's keepCheckoutOnClose; null: the project decides. */
    keepCheckoutOnClose: integer('keep_checkout_on_close', { mode: 'boolean' }),
  },
  (t) => [
    // A live slug is unique (queued rows included: they hold their name while waiting for a slot); gone and
    // failed rows stay behind as history and may repeat.
    uniqueIndex('workspaces_live_slug')
      .on(t.slug)
      .where(sql`${t.state} IN ('queued', 'creating', 'running', 'stopped', 'tearing-down')`),
    index('workspaces_project').on(t.project),
    index('workspaces_queue').on(t.state, t.queueSeq),
  ],
);

export const events = sqliteTable(
  'events',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    slug: text('slug').notNull(),
    type: text('type').notNull(),
    data: text('data', { mode: 'json' }).$type<Record<string, unknown>>().notNull(),
    at: text('at').notNull(),
  },
  (t) => [index('events_slug_id').on(t.slug, t.id)],
);

export type ProjectRow = typeof projects.$inferSelect;
export type NewProjectRow = typeof projects.$inferInsert;
export type WorkspaceRow = typeof workspaces.$inferSelect;
export type NewWorkspaceRow = typeof workspaces.$inferInsert;
export type EventRow = typeof events.$inferSelect;
export type NewEventRow = typeof events.$inferInsert;
