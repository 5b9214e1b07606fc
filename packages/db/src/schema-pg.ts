/**
 * The registry schema for PostgreSQL (DATABASE_URL): the same tables, columns and indexes as schema.ts, column for
 * column, so both dialects hold the same rows and @grove/core reads them as the same types (schema.test.ts checks
 * that). Timestamps stay ISO text as in SQLite, booleans are boolean, JSON is jsonb, ids are identity columns.
 * Change both files together and generate both migrations (`npm run db:generate -w @grove/db`).
 */
import { sql } from 'drizzle-orm';
import { boolean, index, integer, jsonb, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import type { WorkspaceStateValue } from './schema.ts';

export const projects = pgTable('projects', {
  name: text('name').primaryKey(),
  source: text('source').notNull(),
  defaultBranch: text('default_branch').notNull(),
  createdAt: text('created_at').notNull(),
});

export const workspaces = pgTable(
  'workspaces',
  {
    id: integer('id').primaryKey().generatedByDefaultAsIdentity(),
    slug: text('slug').notNull(),
    project: text('project')
      .notNull()
      .references(() => projects.name),
    name: text('name').notNull(),
    isDefault: boolean('is_default').notNull().default(false),
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
    queueSeq: integer('queue_seq'),
    egressPolicy: jsonb('egress_policy').$type<{ rules: Array<{ host: string; ports: number[] }> }>(),
    prUrl: text('pr_url'),
    prNumber: integer('pr_number'),
    prState: text('pr_state').$type<'open' | 'closed' | 'merged'>(),
    cleanupHeld: text('cleanup_held'),
    keepCheckoutOnClose: boolean('keep_checkout_on_close'),
  },
  (t) => [
    uniqueIndex('workspaces_live_slug')
      .on(t.slug)
      .where(sql`${t.state} IN ('queued', 'creating', 'running', 'stopped', 'tearing-down')`),
    index('workspaces_project').on(t.project),
    index('workspaces_queue').on(t.state, t.queueSeq),
  ],
);

export const events = pgTable(
  'events',
  {
    id: integer('id').primaryKey().generatedByDefaultAsIdentity(),
    slug: text('slug').notNull(),
    type: text('type').notNull(),
    data: jsonb('data').$type<Record<string, unknown>>().notNull(),
    at: text('at').notNull(),
  },
  (t) => [index('events_slug_id').on(t.slug, t.id)],
);
