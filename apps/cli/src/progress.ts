// Waiting for a workspace that is being created or started: its lifecycle phases on stderr meanwhile, then
// where the dashboard opens it. Shared by fork, restore and resume; the paged read of a workspace's events too.
import { setTimeout as sleep } from 'node:timers/promises';
import type { GroveEvent, Workspace } from '@grove/contracts';
import { ApiError } from './client.ts';
import type { CliContext } from './context.ts';
import { workspaceUrl } from './format.ts';

const PHASES: Record<string, string> = {
  'workspace.queued': 'all sandbox slots in use: waiting in line',
  'workspace.promoted': 'a slot freed: starting',
  'workspace.reserved': 'slot reserved',
  'workspace.prepared': 'worktree ready',
  'sandbox.started': 'sandbox started',
  'workspace.registered': 'ready',
  'workspace.started': 'ready',
  spawn_failed: 'failed',
};

export const POLL_MS = 250;

/** The most events one read of /api/events gives. */
export const EVENT_PAGE = 1000;

/** Every event of a slug with an id above `after`, oldest first, one page at a time (the API gives 1000 at most). */
export async function* eventPages(ctx: CliContext, slug: string, after = 0): AsyncGenerator<GroveEvent[]> {
  for (;;) {
    const { events } = await ctx.api.events({ query: { slug, after, limit: EVENT_PAGE } });
    if (events.length > 0) yield events;
    after = events.at(-1)?.id ?? after;
    if (events.length < EVENT_PAGE) return;
  }
}

/** The id of the newest event of a slug (0 without any), so progress shows only what happens from now on. */
export async function lastEventId(ctx: CliContext, slug: string): Promise<number> {
  let last = 0;
  for await (const page of eventPages(ctx, slug)) last = page.at(-1)?.id ?? last;
  return last;
}

export interface ProgressOptions {
  slug: string;
  /** Only events after this id are shown (see lastEventId). */
  after: number;
  /** Nothing on stderr (--json). */
  quiet: boolean;
}

/** Print the lifecycle phases of `slug` (events after `after`) on stderr while `task` runs; then its result. */
export async function withProgress<T>(ctx: CliContext, task: Promise<T>, { slug, after, quiet }: ProgressOptions): Promise<T> {
  let settled = false;
  const done = task.then(
    () => (settled = true),
    () => (settled = true),
  );
  let cursor = after;
  const pump = async () => {
    const { events } = await ctx.api.events({ query: { slug, after: cursor, limit: EVENT_PAGE } });
    for (const e of events) {
      cursor = e.id;
      const phase = PHASES[e.type];
      const detail = e.type === 'spawn_failed' ? ` - ${String(e.data.reason ?? '')}` : e.type === 'workspace.queued' ? ` (#${String(e.data.position ?? '?')})` : '';
      if (phase && !quiet) ctx.err(`${slug}: ${phase}${detail}`);
    }
  };
  // Progress is a courtesy: the task's own answer says whether it worked, so a failed read is skipped.
  while (!settled) {
    await pump().catch(() => undefined);
    await Promise.race([done, sleep(POLL_MS)]);
  }
  await pump().catch(() => undefined);
  return task;
}

/** Poll a workspace that is being created until it runs (or its creation failed). */
export async function untilRunning(ctx: CliContext, slug: string): Promise<Workspace> {
  for (;;) {
    const { workspace } = await ctx.api.getWorkspace({ params: { slug } });
    if (workspace.state === 'running') return workspace;
    // A queued fork waits its turn in line, then starts like any other.
    if (workspace.state !== 'creating' && workspace.state !== 'queued') throw new ApiError(500, 'spawn_failed', `${slug}: ${workspace.state}${workspace.failureReason ? ` - ${workspace.failureReason}` : ''}`);
    await sleep(POLL_MS);
  }
}

export interface OpenOptions {
  /** Nothing on stderr (--json). */
  quiet: boolean;
  /**
   * `slug` is a project's name and its default workspace is not there (never begun, torn down, failed): begin one
   * (`grove send`'s first message to a project added with `grove project add`).
   */
  begin?: boolean;
}

/** The workspace as it stands, or null where `begin` may make it: a project's default that is not live. */
async function current(ctx: CliContext, slug: string, begin: boolean): Promise<Workspace | null> {
  const beginsHere = begin && !slug.includes('~');
  try {
    const { workspace } = await ctx.api.getWorkspace({ params: { slug } });
    return beginsHere && (workspace.state === 'gone' || workspace.state === 'failed') ? null : workspace;
  } catch (e) {
    if (beginsHere && e instanceof ApiError && e.code === 'workspace_not_found') return null;
    throw e;
  }
}

/**
 * The workspace, running: started (with progress on stderr unless quiet) when it is stopped, waited for when it is
 * starting or in line; with `begin`, a project's default begun first. Otherwise a torn-down or failed one is not
 * found, with the way to its saved work.
 */
export async function openRunning(ctx: CliContext, slug: string, { quiet, begin = false }: OpenOptions): Promise<Workspace> {
  const found = await current(ctx, slug, begin);
  if (found?.state === 'running') return found;
  // Read before anything is asked of the server, so the progress shows every phase of this start.
  const after = await lastEventId(ctx, slug);
  const workspace = found ?? (await ctx.api.ensureDefault({ params: { project: slug } })).workspace;
  if (workspace.state === 'gone' || workspace.state === 'failed') {
    const why = workspace.state === 'gone' ? 'was torn down' : `failed to start${workspace.failureReason ? ` (${workspace.failureReason})` : ''}`;
    throw new ApiError(404, 'workspace_not_found', `workspace "${slug}" ${why}; its branch ${workspace.branch} is kept. Saved work comes back with: grove restore ${slug} --name <new-name>`);
  }
  if (workspace.state === 'tearing-down') throw new ApiError(409, 'invalid_state', `workspace "${slug}" is being torn down`);
  if (workspace.state === 'running') return workspace;
  const starting = workspace.state === 'creating' || workspace.state === 'queued';
  const task = starting ? untilRunning(ctx, slug) : ctx.api.start({ params: { slug } }).then((r) => r.workspace);
  return withProgress(ctx, task, { slug, after, quiet });
}

export function printWorkspace(ctx: CliContext, w: Workspace, json: boolean): void {
  ctx.out(json ? JSON.stringify(w) : `${w.slug}: ${w.state}${w.failureReason ? ` (${w.failureReason})` : ''}`);
}

/** Fork-like: print the running workspace and where the dashboard opens it. */
export function printReady(ctx: CliContext, w: Workspace, json: boolean): void {
  if (json) return ctx.out(JSON.stringify({ ...w, url: workspaceUrl(ctx.env.url, w) }));
  printWorkspace(ctx, w, false);
  ctx.out(workspaceUrl(ctx.env.url, w));
}
