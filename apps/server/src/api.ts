// The registry API under /api: each route registered from the contracts' endpoint table, which checks its input.
import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { Logger } from 'pino';
import type { Grove } from '@grove/core';
import { GroveError, endpointPath, endpoints, type GroveEvent, type Workspace } from '@grove/contracts';
import { errorPayload } from './errors.ts';
import { createRouter, reply } from './routes.ts';

/** Where the progress of a workspace shows: its audit trail. */
const eventsOf = (slug: string) => endpointPath(endpoints.events, { query: { slug } });

/** 202 for a workspace that waits in line: its place and where its progress shows. */
function queuedReply(workspace: Workspace) {
  if (workspace.state !== 'queued' || workspace.queuePosition === null) return null;
  return reply(202, {
    workspace: { ...workspace, state: 'queued' as const, queuePosition: workspace.queuePosition },
    position: workspace.queuePosition,
    events: eventsOf(workspace.slug),
  });
}

/** wait=false (or 0): answer 202 at once; anything else waits for the workspace to be ready. */
const waits = (q: { wait?: string | undefined }) => !(q.wait === 'false' || q.wait === '0');

export interface ApiOptions {
  grove: Grove;
  logger: Logger;
  /** The preview origin's address of a workspace's port, for a request to this Host (server.ts, from preview.ts). */
  previewUrl?: (host: string | undefined, slug: string, port: number) => string;
}

export function createApi(opts: ApiOptions): Hono {
  const { grove, logger } = opts;
  const app = new Hono();
  const route = createRouter(app, { logger });

  app.onError((err, c) => {
    const { status, body } = errorPayload(err, logger);
    return c.json(body, status as 400);
  });
  app.notFound((c) => c.json({ code: 'not_found', message: `no API route ${c.req.method} ${c.req.path}` }, 404));

  route(endpoints.health, async ({ c }) => {
    c.header('cache-control', 'no-store');
    return { ok: true as const };
  });

  route(endpoints.listProjects, async () => ({ projects: await grove.listProjects() }));
  // A project from a repository: cloned bare under GROVE_HOME (hardened; docs/git-flow.md). No workspace is started:
  // its default begins with its first message (ensureDefault below).
  route(endpoints.addProject, async ({ body }) => ({ project: await grove.addProject({ name: body.name, source: body.source, createDefault: false, failIfExists: true }) }));

  // The project's conversation: the live default as it is, or one begun now (202; in line at the cap).
  route(endpoints.ensureDefault, async ({ params }) => {
    const { workspace, created } = await grove.ensureDefault(params.project);
    if (!created) return { workspace };
    return queuedReply(workspace) ?? reply(202, { workspace, events: eventsOf(workspace.slug) });
  });

  // A project's agent and allowed paths (docs/agents.md): validated, applied to containers created afterwards.
  route(endpoints.projectConfig, async ({ params }) => ({ config: await grove.projectConfig(params.project) }));
  // The body as sent (checked) is stored: defaults are applied when it is read, never written.
  route(endpoints.setProjectConfig, async ({ params, sent }) => ({ config: await grove.setProjectConfig(params.project, sent) }));
  route(endpoints.patchProjectConfig, async ({ params, sent }) => ({ config: await grove.patchProjectConfig(params.project, sent) }));

  // The config-parity overlay (docs/git-flow.md): the user's local files workspaces get and commits never carry.
  route(endpoints.overlay, async ({ params }) => grove.overlayFiles(params.project));
  route(endpoints.putOverlayFile, async ({ params, body }) => grove.putOverlayFile(params.project, body));
  route(endpoints.deleteOverlayFile, async ({ params, query }) => grove.deleteOverlayFile(params.project, query.path));

  route(endpoints.listWorkspaces, async ({ query }) => grove.list({ project: query.project, includeGone: query.all === '1' }));
  route(endpoints.fork, async ({ query, body }) => {
    const wait = waits(query);
    const workspace = await grove.fork(body, { wait });
    // queue: true and no free slot: it waits in line; 202 with its place (the SSE stream tells when it starts).
    const queued = queuedReply(workspace);
    if (queued) return queued;
    if (wait) return { workspace };
    return reply(202, { workspace, events: eventsOf(workspace.slug) });
  });

  route(endpoints.getWorkspace, async ({ params }) => ({ workspace: await grove.get(params.slug) }));
  route(endpoints.stop, async ({ params }) => ({ workspace: await grove.stop(params.slug) }));
  route(endpoints.start, async ({ params, body }) => {
    const workspace = await grove.start(params.slug, { queue: body.queue ?? false });
    return queuedReply(workspace) ?? { workspace };
  });
  route(endpoints.updateWorkspace, async ({ params, body }) => ({ workspace: await grove.update(params.slug, body) }));
  route(endpoints.teardown, async ({ params }) => ({ workspace: await grove.teardown(params.slug) }));

  // The last thing said in the thread, read by the host: a picker can quote it while the workspace is stopped.
  route(endpoints.lastMessage, async ({ params }) => ({ lastMessage: await grove.lastMessage(params.slug) }));
  route(endpoints.recentMessages, async ({ params }) => ({ messages: await grove.recentMessages(params.slug) }));

  // Work saved from a workspace's worktree before it was removed (refs/grove/<slug>/teardown/<n>), and bringing
  // it back as a new workspace. The slug may be gone: saved work outlives it.
  // What a teardown would keep (branch, recovery ref for uncommitted work) and remove, for the confirmation dialog.
  route(endpoints.teardownPreview, async ({ params }) => grove.teardownPreview(params.slug));
  // The address the dashboard frames for the Preview view: only for a workspace that exists (not any slug that
  // parses), and never cached, as it carries the workspace's capability.
  route(endpoints.previewUrl, async ({ params, c }) => {
    await grove.get(params.slug);
    if (!opts.previewUrl) throw new GroveError('internal', 'this server has no preview listener');
    c.header('cache-control', 'no-store');
    // The Host header as it came (a fetch Request made in-process has none: its URL's host is the same thing).
    const host = c.req.header('host') ?? new URL(c.req.url).host;
    return { port: params.port, url: opts.previewUrl(host, params.slug, params.port) };
  });
  route(endpoints.savedWork, async ({ params }) => ({ saved: await grove.savedWork(params.slug) }));
  route(endpoints.restore, async ({ params, query, body }) => {
    const wait = waits(query);
    const workspace = await grove.restore(params.slug, body, { wait });
    if (wait) return { workspace };
    return reply(202, { workspace, events: eventsOf(workspace.slug) });
  });

  // The workspace's egress policy and its latest gate decisions; PUT replaces the policy, applied at once.
  route(endpoints.egress, async ({ params, query }) => grove.egress(params.slug, { limit: query.limit }));
  route(endpoints.setEgressPolicy, async ({ params, body }) => ({ policy: await grove.setEgressPolicy(params.slug, body) }));
  // Reset: drop the workspace's own policy, back to the project default (source "default"); recorded as egress.policy.
  route(endpoints.resetEgress, async ({ params }) => ({ policy: await grove.resetEgressPolicy(params.slug), source: 'default' as const }));

  // Undo the last turn that changed files (repeatable): files back to before it, a marker in the thread.
  route(endpoints.undo, async ({ params }) => grove.undo(params.slug));
  // The turns that changed files (with the one undo would restore) and each one's diff; read from git, so a stopped workspace answers too.
  route(endpoints.turns, async ({ params }) => ({ turns: await grove.turns(params.slug) }));
  route(endpoints.turnDiff, async ({ params }) => grove.turnDiff(params.slug, params.n));

  // Merge-back (docs/git-flow.md): commit the worktree on the branch from the host, the diff against the fork
  // point, and publish (checkpoint, push, pull request). The diff works whether the sandbox runs or not.
  route(endpoints.checkpoint, async ({ params, body }) => grove.checkpoint(params.slug, body));
  route(endpoints.diff, async ({ params, query }) => grove.diff(params.slug, { maxBytes: query.maxBytes }));
  route(endpoints.publish, async ({ params, body }) => grove.publish(params.slug, body));
  // The pull request as the forge reports it now, with its head commit's checks (the Review view; read on demand).
  route(endpoints.pullRequest, async ({ params }) => grove.pullRequest(params.slug));

  route(endpoints.events, async ({ query }) => ({ events: await grove.events(query) }));

  // Live audit events as server-sent events: lifecycle progress and capacity changes reach the
  // dashboard as they happen, with no polling. Last-Event-ID (or ?after=) replays what was missed.
  route(endpoints.eventsStream, async ({ query: q, c }) => {
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
