/** Reading the hub: projects, workspaces, capacity, the last messages, events, and the proxy's socket lookup. */
import { GroveError, RECENT_MESSAGE_CHARS, RECENT_MESSAGES } from '@grove/contracts';
import type { Capacity, GroveEvent, LastMessage, Workspace } from '@grove/contracts';
import type { WorkspaceRow } from '@grove/db';
import { notFound, reasonOf, requireAny } from './context.ts';
import type { GroveContext } from './context.ts';
import type { DiskWatch } from './disks.ts';
import { validProject, validSlug } from './paths.ts';
import { LIVE_STATES, toWorkspace } from './registry.ts';
import { readLastMessage, readRecentMessages } from './thread-summary.ts';

/** socketFor runs per proxied request: write last_activity_at at most this often per workspace. */
const ACTIVITY_WRITE_MS = 5_000;

type Disks = Pick<DiskWatch, 'usageOf'>;

export async function listProjects(ctx: GroveContext): Promise<Array<{ name: string; defaultBranch: string; createdAt: string }>> {
  return (await ctx.store.projects()).map((p) => ({ name: p.name, defaultBranch: p.defaultBranch, createdAt: p.createdAt }));
}

export async function list(
  ctx: GroveContext,
  disks: Disks,
  filter: { project?: string; includeGone?: boolean } = {},
): Promise<{ workspaces: Workspace[]; capacity: Capacity }> {
  const project = filter.project === undefined ? undefined : validProject(filter.project);
  const { rows, positions, capacity } = await ctx.store.listing({ project }, ctx.opts.maxRunning);
  let shown = rows;
  if (!filter.includeGone) {
    // Live rows, plus a failed attempt while it is the newest row of its slug (the card that explains the failure).
    const newest = new Map<string, WorkspaceRow>();
    for (const r of rows) newest.set(r.slug, r);
    shown = rows.filter((r) => (LIVE_STATES as readonly string[]).includes(r.state) || (r.state === 'failed' && newest.get(r.slug) === r));
  }
  const usage = await disks.usageOf(shown);
  return { workspaces: shown.map((r) => ({ ...toWorkspace(r, positions.get(r.id) ?? null), disk: usage.get(r.slug) ?? null })), capacity };
}

export async function capacity(ctx: GroveContext): Promise<Capacity> {
  return ctx.store.capacity(ctx.opts.maxRunning);
}

export async function get(ctx: GroveContext, disks: Disks, slug: string): Promise<Workspace> {
  const row = await requireAny(ctx, slug);
  return { ...(await view(ctx, row)), disk: (await disks.usageOf([row])).get(slug) ?? null };
}

/** The API shape of a row, with its place in the line when it is queued. */
export async function view(ctx: GroveContext, row: WorkspaceRow): Promise<Workspace> {
  return toWorkspace(row, row.state === 'queued' ? ((await ctx.store.queuePositions()).get(row.id) ?? null) : null);
}

export async function lastMessage(ctx: GroveContext, slug: string): Promise<LastMessage | null> {
  const row = await requireAny(ctx, slug);
  // A torn-down workspace's thread was archived with it: nothing to quote under its slug any more.
  if (row.state === 'gone') return null;
  return readLastMessage(ctx.paths.thread(slug));
}

/** The newest things said in its thread, oldest first (RECENT_MESSAGES at most), read like lastMessage. */
export async function recentMessages(ctx: GroveContext, slug: string): Promise<LastMessage[]> {
  const row = await requireAny(ctx, slug);
  if (row.state === 'gone') return [];
  return readRecentMessages(ctx.paths.thread(slug), { count: RECENT_MESSAGES, max: RECENT_MESSAGE_CHARS });
}

export async function events(ctx: GroveContext, query: { slug?: string; after?: number; limit?: number; type?: string } = {}): Promise<GroveEvent[]> {
  if (query.slug !== undefined) validSlug(query.slug);
  return ctx.store.events(query);
}

/** The backend socket of a running workspace for the proxy; marks it active (at most every ACTIVITY_WRITE_MS in the registry). */
export async function socketFor(ctx: GroveContext, slug: string): Promise<string> {
  validSlug(slug);
  // Once per proxied request: route() is the prepared statement on SQLite, a short-lived cache on PostgreSQL.
  const row = await ctx.store.route(slug);
  if (!row) throw notFound(slug);
  if (row.state !== 'running') {
    const hint =
      row.state === 'stopped'
        ? `reopen it with POST /api/workspaces/${slug}/start or \`grove start ${slug}\``
        : row.state === 'creating'
          ? `it is starting; try again in a moment (or POST /api/workspaces/${slug}/start once it is stopped)`
          : row.state === 'queued'
            ? `it waits in line for a sandbox slot (#${(await ctx.store.queuePositions()).get(row.id) ?? '?'}); it starts when a slot frees`
            : 'it is being torn down';
    throw new GroveError('workspace_stopped', `workspace "${slug}" is ${row.state}: ${hint}`, { details: { slug, state: row.state } });
  }
  const now = Date.now();
  if (now - (ctx.activity.get(slug) ?? 0) >= ACTIVITY_WRITE_MS) {
    ctx.activity.set(slug, now);
    // Not awaited: a request never waits for the activity write (the in-memory time above is what idle stop reads first).
    const write = ctx.store
      .touch(row.id, new Date(now).toISOString())
      .catch((err: unknown) => ctx.log.warn({ err, slug }, `could not record activity of ${slug}: ${reasonOf(err)}`))
      .finally(() => ctx.pending.delete(write));
    ctx.pending.add(write); // close() lets these land before it closes the registry
  }
  return ctx.paths.socket(slug);
}
