// The registry API under /api: every body and parameter is checked with the contracts schemas.
import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { Context } from 'hono';
import type { Logger } from 'pino';
import type { Grove } from '@grove/core';
import {
  GroveError,
  eventsQuerySchema,
  forkRequestSchema,
  updateWorkspaceRequestSchema,
  parseOrThrow,
  restoreRequestSchema,
  slugSchema,
  startRequestSchema,
  egressPolicySchema,
  type EgressResetResponse,
  type EgressResponse,
  type ErrorCode,
  type EventsResponse,
  type LastMessageResponse,
  type ForkQueuedResponse,
  type GroveEvent,
  type ListWorkspacesResponse,
  type SavedWorkResponse,
  type Workspace,
  type WorkspaceResponse,
} from '@grove/contracts';
import { overlayPathQuerySchema, projectConfigPatchSchema, projectConfigSchema, projectNameSchema, putOverlayFileRequestSchema } from '@grove/contracts';
import { addProjectRequestSchema, checkpointRequestSchema, diffQuerySchema, publishRequestSchema, turnNumberSchema } from '@grove/contracts';
import type { ProjectConfigResponse, TeardownPreview, TurnDiffResponse, TurnsResponse, UndoResponse } from '@grove/contracts';
import type { CheckpointResponse, DiffResponse, OverlayListResponse, Project, PublishResponse } from '@grove/contracts';
import { z } from 'zod';
import { errorPayload } from './errors.ts';

const NAME_FIELDS = new Set(['name', 'project']);

async function readJson(c: Context): Promise<unknown> {
  const type = c.req.header('content-type') ?? '';
  if (!type.includes('application/json')) {
    throw new GroveError('invalid_input', 'request body must be JSON (content-type: application/json)');
  }
  try {
    return await c.req.json();
  } catch {
    throw new GroveError('invalid_input', 'request body is not valid JSON');
  }
}

/** Check value against schema and keep it as sent (no defaults filled in), for what is stored as given. */
function checkAsSent<S extends z.ZodType>(schema: S, value: unknown, what: string): asserts value is z.input<S> {
  parseOrThrow(schema, value, { what });
}

/** A body that may be left out entirely (POST start, checkpoint, publish): absent means {}; otherwise it must be JSON. */
async function readOptionalJson(c: Context): Promise<unknown> {
  const text = await c.req.text();
  if (!text.trim()) return {};
  if (!(c.req.header('content-type') ?? '').includes('application/json')) {
    throw new GroveError('invalid_input', 'request body must be JSON (content-type: application/json)');
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new GroveError('invalid_input', 'request body is not valid JSON');
  }
}

/** 202 for a workspace that waits in line: its place and where its progress shows. */
function queuedBody(workspace: Workspace): ForkQueuedResponse | null {
  if (workspace.state !== 'queued' || workspace.queuePosition === null) return null;
  return {
    workspace: { ...workspace, state: 'queued', queuePosition: workspace.queuePosition },
    position: workspace.queuePosition,
    events: `/api/events?slug=${encodeURIComponent(workspace.slug)}`,
  };
}

/** Names get their own code so clients can point at the field; everything else is invalid_input. */
function parseFork(body: unknown) {
  const r = forkRequestSchema.safeParse(body);
  if (r.success) return r.data;
  const nameIssue = r.error.issues.some((i) => NAME_FIELDS.has(String(i.path[0])));
  const code: ErrorCode = nameIssue ? 'invalid_name' : 'invalid_input';
  return parseOrThrow(forkRequestSchema, body, { what: 'workspace request', code });
}

function parseRestore(body: unknown) {
  const r = restoreRequestSchema.safeParse(body);
  if (r.success) return r.data;
  const nameIssue = r.error.issues.some((i) => NAME_FIELDS.has(String(i.path[0])));
  return parseOrThrow(restoreRequestSchema, body, { what: 'restore request', code: nameIssue ? 'invalid_name' : 'invalid_input' });
}

function projectParam(c: Context): string {
  return parseOrThrow(projectNameSchema, c.req.param('project'), { what: 'project name', code: 'invalid_name' });
}

function slugParam(c: Context): string {
  return parseOrThrow(slugSchema, c.req.param('slug'), { what: 'workspace slug', code: 'invalid_name' });
}

const listQuerySchema = z.object({ project: z.string().optional(), all: z.enum(['0', '1']).optional() });
const egressQuerySchema = z.object({ limit: z.coerce.number().int().min(1).max(500).optional() });
const forkQuerySchema = z.object({ wait: z.enum(['true', 'false', '1', '0']).optional() });

export function createApi(opts: { grove: Grove; logger: Logger }): Hono {
  const { grove, logger } = opts;
  const app = new Hono();

  app.onError((err, c) => {
    const { status, body } = errorPayload(err, logger);
    return c.json(body, status as 400);
  });
  app.notFound((c) => c.json({ code: 'not_found', message: `no API route ${c.req.method} ${c.req.path}` }, 404));

  app.get('/api/projects', async (c) => c.json({ projects: await grove.listProjects() }));

  // A project from a repository: cloned bare under GROVE_HOME (hardened; docs/git-flow.md). No workspace is started.
  app.post('/api/projects', async (c) => {
    const body = await readJson(c);
    const nameIssue = addProjectRequestSchema.safeParse(body).error?.issues.some((i) => String(i.path[0]) === 'name') ?? false;
    const req = parseOrThrow(addProjectRequestSchema, body, { what: 'project request', code: nameIssue ? 'invalid_name' : 'invalid_input' });
    const project = await grove.addProject({ name: req.name, source: req.source, createDefault: false, failIfExists: true });
    return c.json({ project } satisfies { project: Project }, 201);
  });

  // A project's agent and allowed paths (docs/agents.md). PUT validates and applies to containers created afterwards.
  app.get('/api/projects/:project/config', async (c) => c.json({ config: await grove.projectConfig(projectParam(c)) } satisfies ProjectConfigResponse));
  app.put('/api/projects/:project/config', async (c) => {
    const project = projectParam(c);
    const body = await readJson(c);
    checkAsSent(projectConfigSchema, body, 'project config');
    // The body as sent (checked above) is stored: defaults are applied when it is read, never written.
    return c.json({ config: await grove.setProjectConfig(project, body) } satisfies ProjectConfigResponse);
  });
  app.patch('/api/projects/:project/config', async (c) => {
    const project = projectParam(c);
    const body = await readJson(c);
    checkAsSent(projectConfigPatchSchema, body, 'project config change');
    return c.json({ config: await grove.patchProjectConfig(project, body) } satisfies ProjectConfigResponse);
  });

  // The config-parity overlay (docs/git-flow.md): the user's local files workspaces get and commits never carry.
  app.get('/api/projects/:project/overlay', async (c) => c.json((await grove.overlayFiles(projectParam(c))) satisfies OverlayListResponse));
  app.put('/api/projects/:project/overlay', async (c) => {
    const project = projectParam(c);
    const req = parseOrThrow(putOverlayFileRequestSchema, await readJson(c), { what: 'overlay file' });
    return c.json((await grove.putOverlayFile(project, req)) satisfies OverlayListResponse);
  });
  app.delete('/api/projects/:project/overlay', async (c) => {
    const project = projectParam(c);
    const q = parseOrThrow(overlayPathQuerySchema, c.req.query(), { what: 'query' });
    return c.json((await grove.deleteOverlayFile(project, q.path)) satisfies OverlayListResponse);
  });

  app.get('/api/workspaces', async (c) => {
    const q = parseOrThrow(listQuerySchema, c.req.query(), { what: 'query' });
    const body: ListWorkspacesResponse = await grove.list({ project: q.project, includeGone: q.all === '1' });
    return c.json(body);
  });

  app.post('/api/workspaces', async (c) => {
    const q = parseOrThrow(forkQuerySchema, c.req.query(), { what: 'query' });
    const req = parseFork(await readJson(c));
    const wait = !(q.wait === 'false' || q.wait === '0');
    const workspace = await grove.fork(req, { wait });
    // queue: true and no free slot: it waits in line; 202 with its place (the SSE stream tells when it starts).
    const queued = queuedBody(workspace);
    if (queued) return c.json(queued, 202);
    if (wait) return c.json({ workspace } satisfies WorkspaceResponse, 201);
    return c.json({ workspace, events: `/api/events?slug=${encodeURIComponent(workspace.slug)}` }, 202);
  });

  app.get('/api/workspaces/:slug', async (c) => c.json({ workspace: await grove.get(slugParam(c)) } satisfies WorkspaceResponse));
  app.post('/api/workspaces/:slug/stop', async (c) => c.json({ workspace: await grove.stop(slugParam(c)) } satisfies WorkspaceResponse));
  app.post('/api/workspaces/:slug/start', async (c) => {
    const slug = slugParam(c);
    const req = parseOrThrow(startRequestSchema, await readOptionalJson(c), { what: 'start request' });
    const workspace = await grove.start(slug, { queue: req.queue ?? false });
    const queued = queuedBody(workspace);
    if (queued) return c.json(queued, 202);
    return c.json({ workspace } satisfies WorkspaceResponse);
  });
  app.patch('/api/workspaces/:slug', async (c) => {
    const slug = slugParam(c);
    const req = parseOrThrow(updateWorkspaceRequestSchema, await readJson(c), { what: 'workspace settings' });
    return c.json({ workspace: await grove.update(slug, req) } satisfies WorkspaceResponse);
  });
  app.delete('/api/workspaces/:slug', async (c) => c.json({ workspace: await grove.teardown(slugParam(c)) } satisfies WorkspaceResponse));

  // The last thing said in the thread, read by the host: a picker can quote it while the workspace is stopped.
  app.get('/api/workspaces/:slug/last-message', async (c) => c.json({ lastMessage: await grove.lastMessage(slugParam(c)) } satisfies LastMessageResponse));

  // Work saved from a workspace's worktree before it was removed (refs/grove/<slug>/teardown/<n>), and bringing
  // it back as a new workspace. The slug may be gone: saved work outlives it.
  // What a teardown would keep (branch, recovery ref for uncommitted work) and remove, for the confirmation dialog.
  app.get('/api/workspaces/:slug/teardown-preview', async (c) => c.json((await grove.teardownPreview(slugParam(c))) satisfies TeardownPreview));
  app.get('/api/workspaces/:slug/saved', async (c) => c.json({ saved: await grove.savedWork(slugParam(c)) } satisfies SavedWorkResponse));
  app.post('/api/workspaces/:slug/restore', async (c) => {
    const q = parseOrThrow(forkQuerySchema, c.req.query(), { what: 'query' });
    const req = parseRestore(await readJson(c));
    const wait = !(q.wait === 'false' || q.wait === '0');
    const workspace = await grove.restore(slugParam(c), req, { wait });
    if (wait) return c.json({ workspace } satisfies WorkspaceResponse, 201);
    return c.json({ workspace, events: `/api/events?slug=${encodeURIComponent(workspace.slug)}` }, 202);
  });

  // The workspace's egress policy and its latest gate decisions; PUT replaces the policy, applied at once.
  app.get('/api/workspaces/:slug/egress', async (c) => {
    const q = parseOrThrow(egressQuerySchema, c.req.query(), { what: 'query' });
    return c.json((await grove.egress(slugParam(c), { limit: q.limit })) satisfies EgressResponse);
  });
  app.put('/api/workspaces/:slug/egress', async (c) => {
    const slug = slugParam(c);
    const policy = parseOrThrow(egressPolicySchema, await readJson(c), { what: 'egress policy' });
    return c.json({ policy: await grove.setEgressPolicy(slug, policy) });
  });
  // Reset: drop the workspace's own policy, back to the project default (source "default"); recorded as egress.policy.
  app.delete('/api/workspaces/:slug/egress', async (c) => c.json({ policy: await grove.resetEgressPolicy(slugParam(c)), source: 'default' } satisfies EgressResetResponse));

  // Undo the last turn that changed files (repeatable): files back to before it, a marker in the thread.
  app.post('/api/workspaces/:slug/undo', async (c) => c.json((await grove.undo(slugParam(c))) satisfies UndoResponse));
  // The turns that changed files (with the one undo would restore) and each one's diff; read from git, so a stopped workspace answers too.
  app.get('/api/workspaces/:slug/turns', async (c) => c.json({ turns: await grove.turns(slugParam(c)) } satisfies TurnsResponse));
  app.get('/api/workspaces/:slug/turns/:n/diff', async (c) => {
    const slug = slugParam(c);
    const n = parseOrThrow(turnNumberSchema, c.req.param('n'), { what: 'turn number' });
    return c.json((await grove.turnDiff(slug, n)) satisfies TurnDiffResponse);
  });

  // Merge-back (docs/git-flow.md): commit the worktree on the branch from the host, the diff against the fork
  // point, and publish (checkpoint, push, pull request). The diff works whether the sandbox runs or not.
  app.post('/api/workspaces/:slug/checkpoint', async (c) => {
    const slug = slugParam(c);
    const req = parseOrThrow(checkpointRequestSchema, await readOptionalJson(c), { what: 'checkpoint request' });
    return c.json((await grove.checkpoint(slug, req)) satisfies CheckpointResponse);
  });
  app.get('/api/workspaces/:slug/diff', async (c) => {
    const q = parseOrThrow(diffQuerySchema, c.req.query(), { what: 'query' });
    return c.json((await grove.diff(slugParam(c), { maxBytes: q.maxBytes })) satisfies DiffResponse);
  });
  app.post('/api/workspaces/:slug/publish', async (c) => {
    const slug = slugParam(c);
    const req = parseOrThrow(publishRequestSchema, await readOptionalJson(c), { what: 'publish request' });
    return c.json((await grove.publish(slug, req)) satisfies PublishResponse);
  });

  app.get('/api/events', async (c) => {
    const q = parseOrThrow(eventsQuerySchema, c.req.query(), { what: 'query' });
    const body: EventsResponse = { events: await grove.events(q) };
    return c.json(body);
  });

  // Live audit events as server-sent events: lifecycle progress and capacity changes reach the
  // dashboard as they happen, with no polling. Last-Event-ID (or ?after=) replays what was missed.
  app.get('/api/events/stream', (c) => {
    const q = parseOrThrow(eventsQuerySchema, c.req.query(), { what: 'query' });
    const lastId = Number(c.req.header('last-event-id') ?? q.after ?? NaN);
    return streamSSE(c, async (stream) => {
      const queue: GroveEvent[] = [];
      let wake = () => {};
      const off = grove.onEvent((e) => {
        if ((q.slug && e.slug !== q.slug) || (q.type && e.type !== q.type)) return;
        queue.push(e);
        wake();
      });
      stream.onAbort(() => {
        off();
        wake();
      });
      if (Number.isInteger(lastId)) queue.unshift(...(await grove.events({ slug: q.slug, type: q.type, after: lastId, limit: 1000 })));
      let sent = Number.isInteger(lastId) ? lastId : 0;
      while (!stream.aborted) {
        for (let e = queue.shift(); e; e = queue.shift()) {
          if (e.id <= sent) continue;
          sent = e.id;
          await stream.writeSSE({ id: String(e.id), event: 'grove', data: JSON.stringify(e) });
        }
        const woke = await new Promise<boolean>((resolve) => {
          const t = setTimeout(() => resolve(false), 15_000);
          wake = () => {
            clearTimeout(t);
            resolve(true);
          };
        });
        // A comment line keeps proxies and browsers from timing the stream out.
        if (!woke && !stream.aborted) await stream.write(': ping\n\n');
      }
      off();
    });
  });

  return app;
}
