import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { GroveError, endpoints, type Workspace } from '@grove/contracts';
import { GroveClientError, createClient, type FetchLike } from './index.ts';

// A Hono app in memory stands in for the server: routes at the table's paths answering what each test needs.
// The server's own routes are checked against this client in apps/server/src/api-client.test.ts.

function workspace(slug: string, state: Workspace['state'] = 'running'): Workspace {
  const at = '2026-01-01T00:00:00.000Z';
  return { slug, project: 'demo', name: slug.split('~')[1] ?? 'default', isDefault: !slug.includes('~'), branch: `grove/${slug}`, baseRef: 'main', state, failureReason: null, agentSessionId: null, createdAt: at, updatedAt: at, lastActivityAt: null, queuePosition: state === 'queued' ? 1 : null };
}

interface Seen {
  method: string;
  url: string;
  contentType: string | null;
  authorization: string | null;
  body: string;
}

function harness() {
  const app = new Hono();
  const seen: Seen[] = [];
  app.use(async (c, next) => {
    seen.push({ method: c.req.method, url: c.req.url, contentType: c.req.header('content-type') ?? null, authorization: c.req.header('authorization') ?? null, body: await c.req.raw.clone().text() });
    await next();
  });
  const fetchApp: FetchLike = async (url, init) => app.fetch(new Request(url, init));
  return { app, seen, fetchApp };
}

describe('@grove/client against an in-memory app', () => {
  it('puts parameters and query into the table path, encoded, and parses the answer with the response schema', async () => {
    const { app, seen, fetchApp } = harness();
    app.get(endpoints.turnDiff.path, (c) => c.json({ n: Number(c.req.param('n')), turn: `turn-${c.req.param('n')}`, diff: c.req.param('slug'), truncated: false, limitBytes: 1024, extra: 'dropped' }));
    app.delete(endpoints.deleteOverlayFile.path, (c) => c.json({ files: [{ path: c.req.query('path') ?? '', writable: false, size: 1 }] }));
    const client = createClient({ baseUrl: 'http://grove.test/', fetch: fetchApp, headers: { authorization: 'Bearer t0' } });

    const diff = await client.turnDiff({ params: { slug: 'demo~x', n: 3 } });
    expect(diff).toEqual({ n: 3, turn: 'turn-3', diff: 'demo~x', truncated: false, limitBytes: 1024 });
    const overlay = await client.deleteOverlayFile({ params: { project: 'demo' }, query: { path: '.claude/a b.json' } });
    expect(overlay.files[0]?.path).toBe('.claude/a b.json');

    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      'GET http://grove.test/api/workspaces/demo~x/turns/3/diff',
      'DELETE http://grove.test/api/projects/demo/overlay?path=.claude%2Fa%20b.json',
    ]);
    // Calls without a body send no content-type (the API refuses a body that is not declared as JSON).
    expect(seen.map((s) => [s.contentType, s.authorization, s.body])).toEqual([
      [null, 'Bearer t0', ''],
      [null, 'Bearer t0', ''],
    ]);
  });

  it('sends a body as JSON, leaves an optional one out, and asks a headers function on every call', async () => {
    const { app, seen, fetchApp } = harness();
    app.put(endpoints.setEgressPolicy.path, async (c) => c.json({ policy: (await c.req.json()) as unknown }));
    app.post(endpoints.start.path, (c) => c.json({ workspace: workspace(c.req.param('slug')) }));
    let n = 0;
    const client = createClient({ baseUrl: 'http://grove.test', fetch: fetchApp, headers: () => ({ 'x-call': String((n += 1)) }) });

    const r = await client.setEgressPolicy({ params: { slug: 'demo' }, body: { rules: [{ host: 'Example.COM', ports: [443, 80] }] } });
    // The answer went through the response schema: hosts canonical, ports sorted.
    expect(r.policy.rules).toEqual([{ host: 'example.com', ports: [80, 443] }]);
    await client.start({ params: { slug: 'demo~x' } });
    expect(seen.map((s) => [s.method, s.contentType, s.body])).toEqual([
      ['PUT', 'application/json', JSON.stringify({ rules: [{ host: 'Example.COM', ports: [443, 80] }] })],
      ['POST', null, ''],
    ]);
    expect(n).toBe(2);
  });

  it('parses each success status with its own schema and refuses one the table does not list', async () => {
    const { app, fetchApp } = harness();
    app.post(endpoints.fork.path, async (c) => {
      const body = (await c.req.json()) as { name: string };
      if (body.name === 'later') return c.json({ workspace: workspace('demo~later', 'queued'), position: 1, events: '/api/events?slug=demo~later' }, 202);
      if (body.name === 'odd') return c.json({ workspace: workspace('demo~odd') }, 200);
      return c.json({ workspace: workspace(`demo~${body.name}`) }, 201);
    });
    const client = createClient({ baseUrl: 'http://grove.test', fetch: fetchApp });
    expect((await client.fork({ body: { project: 'demo', name: 'now' } })).workspace.slug).toBe('demo~now');
    const queued = await client.fork({ body: { project: 'demo', name: 'later', queue: true }, query: { wait: 'false' } });
    expect(queued).toMatchObject({ position: 1, events: '/api/events?slug=demo~later' });
    const odd = await client.fork({ body: { project: 'demo', name: 'odd' } }).catch((e: unknown) => e);
    expect(odd).toBeInstanceOf(GroveClientError);
    expect(odd).toMatchObject({ kind: 'bad_response', status: 200, method: 'POST', path: '/api/workspaces' });
  });

  it('turns an answer its schema refuses into bad_response with the issues', async () => {
    const { app, fetchApp } = harness();
    app.get(endpoints.getWorkspace.path, (c) => c.json({ workspace: { slug: c.req.param('slug') } }));
    const client = createClient({ baseUrl: 'http://grove.test', fetch: fetchApp });
    const e = await client.getWorkspace({ params: { slug: 'demo' } }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(GroveClientError);
    expect(e).toMatchObject({ kind: 'bad_response', status: 200, path: '/api/workspaces/demo' });
    expect((e as GroveClientError).issues.map((i) => i.path.join('.'))).toContain('workspace.branch');
  });

  it("turns Grove's error body into GroveError with its code, message and details", async () => {
    const { app, fetchApp } = harness();
    app.post(endpoints.fork.path, (c) => c.json({ code: 'capacity_reached', message: 'all 2 sandboxes are in use', running: 2, cap: 2 }, 429));
    app.get(endpoints.projectConfig.path, (c) => c.json({ code: 'invalid_name', message: 'invalid project name: name must be lowercase', issues: [{ path: '', message: 'name must be lowercase' }] }, 422));
    const client = createClient({ baseUrl: 'http://grove.test', fetch: fetchApp });

    const full = await client.fork({ body: { project: 'demo', name: 'x' } }).catch((e: unknown) => e);
    expect(full).toBeInstanceOf(GroveError);
    expect(full).toMatchObject({ code: 'capacity_reached', status: 429, message: 'all 2 sandboxes are in use', details: { running: 2, cap: 2 } });
    expect((full as GroveError).toBody()).toEqual({ code: 'capacity_reached', message: 'all 2 sandboxes are in use', running: 2, cap: 2 });
    const bad = await client.projectConfig({ params: { project: 'Demo' } }).catch((e: unknown) => e);
    expect(bad).toMatchObject({ code: 'invalid_name', status: 422, details: { issues: [{ path: '', message: 'name must be lowercase' }] } });
  });

  it('says when an error is not Grove’s or Grove does not answer, and maps errors when asked', async () => {
    const { app, fetchApp } = harness();
    app.get(endpoints.listProjects.path, (c) => c.text('Bad Gateway', 502));
    const client = createClient({ baseUrl: 'http://grove.test', fetch: fetchApp });
    await expect(client.listProjects()).rejects.toMatchObject({ kind: 'unexpected_status', status: 502, message: expect.stringMatching(/Grove answered 502 .*GET \/api\/projects/) as string });

    const down = createClient({
      baseUrl: 'http://127.0.0.1:9',
      fetch: async () => {
        throw new TypeError('fetch failed');
      },
      mapError: (e) => new Error(`mapped ${e instanceof GroveClientError ? e.kind : e.code}`, { cause: e }),
    });
    const e = (await down.listProjects().catch((x: unknown) => x)) as Error;
    expect(e.message).toBe('mapped unreachable');
    expect(e.cause).toMatchObject({ kind: 'unreachable', status: 0, message: expect.stringContaining('fetch failed') as string });
  });

  it('builds URLs for stream endpoints, and makes raw calls outside the table with the same errors', async () => {
    const { app, fetchApp } = harness();
    app.get('/w/:slug/status', (c) => c.json({ busy: c.req.param('slug') === 'demo' }));
    app.post('/w/:slug/messages', (c) => c.json({ code: 'workspace_stopped', message: 'paused' }, 409));
    const client = createClient({ baseUrl: 'http://grove.test', fetch: fetchApp });
    expect(client.url('eventsStream', { query: { after: 7 } })).toBe('http://grove.test/api/events/stream?after=7');
    expect(createClient({ baseUrl: '' }).url('eventsStream')).toBe('/api/events/stream');
    expect(await client.raw({ method: 'GET', path: '/w/demo/status', schema: z.object({ busy: z.boolean() }) })).toEqual({ busy: true });
    await expect(client.raw({ method: 'POST', path: '/w/demo/messages', schema: z.object({}), body: { text: 'hi' } })).rejects.toMatchObject({ code: 'workspace_stopped', status: 409 });
  });
});
