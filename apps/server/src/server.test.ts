import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { Duplex } from 'node:stream';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { pino } from 'pino';
import type { Grove } from '@grove/core';
import { GroveError, forkQueuedResponseSchema, lastMessageResponseSchema, recentMessagesResponseSchema, type GroveEvent, type Workspace } from '@grove/contracts';
import { createGroveServer, type GroveServer } from './server.ts';
import { previewCap } from './preview.ts';

// Handlers tested in memory: a small in-memory Grove (the registry logic itself is tested in
// packages/core and e2e/ against real Docker) and a real HTTP + WebSocket server on a Unix socket.
const TOKEN = 'test-token-0123456789abcdef';
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'grove-server-test-'));
const sock = path.join(dir, 'backend.sock');

function ws(slug: string, state: Workspace['state']): Workspace {
  const now = new Date().toISOString();
  return { slug, project: 'demo', name: slug.split('~')[1] ?? 'default', isDefault: !slug.includes('~'), branch: 'grove/x', baseRef: 'main', state, failureReason: null, agentSessionId: null, createdAt: now, updatedAt: now, lastActivityAt: null, queuePosition: state === 'queued' ? 2 : null };
}

const registry = new Map<string, Workspace>([
  ['demo', ws('demo', 'running')],
  ['demo~off', ws('demo~off', 'stopped')],
]);
const forks: unknown[] = [];
const listeners = new Set<(e: GroveEvent) => void>();
const history: GroveEvent[] = [
  { id: 1, slug: 'demo', type: 'workspace.reserved', data: {}, at: new Date().toISOString() },
  { id: 2, slug: 'demo', type: 'workspace.registered', data: {}, at: new Date().toISOString() },
];

const grove: Grove = {
  reconcile: async () => {},
  addProject: async (o) => ({ name: o.name, defaultBranch: 'main', createdAt: new Date().toISOString() }),
  ensureDefault: async (project) => ({ workspace: ws(project, 'running'), created: false }),
  checkpoint: async () => ({ commit: null, branch: 'grove/x', files: [] }), // git-flow routes: git-flow-api.test.ts
  diff: async () => {
    throw new GroveError('not_found', 'no diff here');
  },
  publish: async () => {
    throw new GroveError('not_configured', 'no forge');
  },
  pullRequest: async () => {
    throw new GroveError('not_configured', 'no forge');
  },
  watchPullRequests: async () => ({ fetched: [], fetchFailed: [], changed: [] }),
  listProjects: async () => [{ name: 'demo', defaultBranch: 'main', createdAt: new Date().toISOString() }],
  list: async () => ({ workspaces: [...registry.values()], capacity: { running: 1, creating: 0, cap: 2, queued: 0 } }),
  capacity: async () => ({ running: 1, creating: 0, cap: 2, queued: 0 }),
  get: async (slug) => {
    const w = registry.get(slug);
    if (!w) throw new GroveError('workspace_not_found', `no workspace "${slug}"`);
    return w;
  },
  fork: async (req) => {
    forks.push(req);
    if (req.name === 'full') throw new GroveError('capacity_reached', 'all 2 sandboxes are in use', { details: { running: 2, cap: 2 } });
    if (req.name === 'wait') return ws(`${req.project}~${req.name}`, req.queue ? 'queued' : 'running');
    return ws(`${req.project}~${req.name}`, 'running');
  },
  stop: async (slug) => ws(slug, 'stopped'),
  start: async (slug, opts) => ws(slug, opts?.queue ? 'queued' : 'running'),
  teardown: async (slug) => ws(slug, 'gone'),
  update: async (slug, req) => {
    forks.push({ update: slug, ...req });
    return { ...ws(slug, 'running'), keepCheckoutOnClose: req.keepCheckoutOnClose ?? null };
  },
  savedWork: async (slug) => (slug === 'demo~old' ? [{ ref: 'refs/grove/demo+old/teardown/1', n: 1, commit: 'a'.repeat(40) }] : []),
  lastMessage: async (slug) => {
    if (!registry.has(slug)) throw new GroveError('workspace_not_found', `no workspace "${slug}"`);
    return slug === 'demo~off' ? { who: 'agent', text: 'all green', at: '2026-01-01T00:00:00.000Z' } : null;
  },
  recentMessages: async (slug) => {
    if (!registry.has(slug)) throw new GroveError('workspace_not_found', `no workspace "${slug}"`);
    return slug === 'demo~off' ? [{ who: 'user', text: 'run the tests', at: '2026-01-01T00:00:00.000Z' }, { who: 'agent', text: 'all green\n\n3 passed', at: '2026-01-01T00:00:01.000Z' }] : [];
  },
  restore: async (slug, req) => {
    forks.push({ restore: slug, ...req });
    if (slug !== 'demo~old') throw new GroveError('not_found', `workspace "${slug}" has no saved work to restore`);
    return ws(`demo~${req.name}`, 'running');
  },
  overlayFiles: async () => ({ files: [] }), // overlay routes: git-flow-api.test.ts
  putOverlayFile: async () => ({ files: [] }),
  deleteOverlayFile: async () => ({ files: [] }),
  egress: async () => ({ policy: { rules: [] }, source: 'default', decisions: [] }), // egress routes: egress-api.test.ts
  setEgressPolicy: async () => ({ rules: [] }),
  resetEgressPolicy: async () => ({ rules: [] }),
  teardownPreview: async (slug) => ({
    slug,
    branch: `grove/${slug}`,
    baseRef: 'main',
    commitsAhead: 0,
    uncommitted: { total: 0, files: [] },
    recoveryRef: null,
    removes: { sandbox: true, worktree: true },
  }),
  turns: async () => [], // turn routes: agents-api.test.ts
  turnDiff: async () => {
    throw new GroveError('not_found', 'no turn');
  },
  events: async (q) => history.filter((e) => (q?.after === undefined || e.id > q.after) && (!q?.slug || e.slug === q.slug)),
  onEvent: (l) => {
    listeners.add(l);
    return () => listeners.delete(l);
  },
  socketFor: async (slug) => {
    const w = registry.get(slug);
    if (!w) throw new GroveError('workspace_not_found', `no workspace "${slug}"`);
    if (w.state !== 'running') throw new GroveError('workspace_stopped', `workspace "${slug}" is stopped; reopen it with POST /api/workspaces/${slug}/start`, { details: { slug, state: w.state } });
    // A workspace whose backend never listened: its socket is not there.
    if (slug.endsWith('~gone')) return path.join(dir, 'gone.sock');
    // Sockets the tests below plant or replace under a slug of their own.
    const planted = /~(planted-[a-z]+|swap|slow)$/.exec(slug);
    return planted ? path.join(dir, `${planted[1]}.sock`) : sock;
  },
  projectConfig: async () => ({}),
  setProjectConfig: async () => ({}),
  patchProjectConfig: async () => ({}),
  undo: async () => {
    throw new GroveError('invalid_state', 'nothing to undo');
  },
  close: async () => {},
};

let backend: http.Server;
let front: GroveServer;
/** What the front door logged at level error: a client that goes away is not one. */
const errorLines: string[] = [];
let base: string;
let previewBase: string;

beforeAll(async () => {
  backend = http.createServer((req, res) => {
    if (req.url?.startsWith('/preview/')) {
      // What a dev server behind the backend's /preview could answer, and what it saw.
      res.writeHead(200, { 'content-type': 'application/json', 'set-cookie': ['grove_token=shadow; Path=/api', 'app=1; Path=/'], 'service-worker-allowed': '/' });
      res.end(JSON.stringify({ url: req.url, headers: req.headers }));
      return;
    }
    if (req.url === '/hostile') {
      // What a backend the agent took over could answer on the dashboard's origin.
      res.writeHead(200, {
        'content-type': 'text/html',
        'set-cookie': ['grove_token=shadow; Path=/', 'other=1; Path=/'],
        'clear-site-data': '"cookies"',
        'content-security-policy': "script-src 'unsafe-inline'",
        'x-frame-options': 'ALLOWALL',
        'service-worker-allowed': '/',
      });
      res.end('<script>fetch("/api/workspaces")</script>');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    if (req.url === '/headers') {
      res.end(JSON.stringify(req.headers));
      return;
    }
    res.end(JSON.stringify({ url: req.url, method: req.method }));
  });
  const wss = new WebSocketServer({ noServer: true });
  wss.on('connection', (s, req) => s.send(`hello ${req.url}`));
  // The handshake sets a cookie, as a hostile backend could, and a header in UTF-8 (ws writes it so).
  wss.on('headers', (headers) => headers.push('Set-Cookie: grove_token=shadow; Path=/', 'X-Name: café'));
  backend.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    if (req.url === '/refuse' || req.url === '/preview/4173/refuse') {
      socket.end('HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nSet-Cookie: grove_token=shadow; Path=/\r\nContent-Length: 4\r\n\r\nnope');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });
  await new Promise<void>((r) => backend.listen(sock, r));
  front = createGroveServer({ grove, logger: pino({ level: 'error' }, { write: (line: string) => void errorLines.push(line) }), token: TOKEN });
  const port = await front.listen(0, '127.0.0.1');
  base = `http://127.0.0.1:${port}`;
  previewBase = `http://127.0.0.1:${await front.listenPreview(0, '127.0.0.1')}`;
});

afterAll(async () => {
  await front.close();
  await new Promise<void>((r) => backend.close(() => r()));
  fs.rmSync(dir, { recursive: true, force: true });
});

const auth = { authorization: `Bearer ${TOKEN}` };

type Body = { code?: string; message?: string; workspace?: Workspace; workspaces?: Workspace[]; capacity?: unknown; [k: string]: unknown };
const readBody = async (r: Response): Promise<Body> => (await r.json()) as Body;

async function wsOpen(url: string, headers: Record<string, string>): Promise<{ status?: number; first?: string }> {
  return new Promise((resolve) => {
    const s = new WebSocket(url, { headers });
    s.on('unexpected-response', (_req, res) => resolve({ status: res.statusCode }));
    s.on('message', (m) => {
      resolve({ first: String(m) });
      s.close();
    });
    s.on('error', () => {});
  });
}

/** An upgrade the server answers without switching: its status, Set-Cookie and body. */
async function wsRefused(url: string, headers: Record<string, string>): Promise<{ status?: number; cookie?: string[]; body: string }> {
  return new Promise((resolve) => {
    const s = new WebSocket(url, { headers });
    s.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode, cookie: res.headers['set-cookie'], body }));
    });
    s.on('error', () => {});
  });
}

describe('auth', () => {
  it('answers /api/health without a token and reveals nothing else', async () => {
    const r = await fetch(`${base}/api/health`);
    expect(r.status).toBe(200);
    expect(await readBody(r)).toEqual({ ok: true });
  });

  it.each(['/api/workspaces', '/api/events', '/api/projects', '/w/demo/health', '/w/demo/thread', '/api/workspaces/demo'])('refuses %s without a token', async (p) => {
    const r = await fetch(`${base}${p}`);
    expect(r.status).toBe(401);
    expect((await readBody(r)).code).toBe('unauthorized');
  });

  it('refuses a wrong token and a write without one', async () => {
    expect((await fetch(`${base}/api/workspaces`, { headers: { authorization: 'Bearer nope-nope-nope-nope' } })).status).toBe(401);
    const r = await fetch(`${base}/api/workspaces`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(r.status).toBe(401);
  });

  it('refuses the WebSocket upgrade without a token', async () => {
    const res = await wsOpen(`${base.replace('http', 'ws')}/w/demo/stream`, {});
    expect(res.status).toBe(401);
  });

  it('sets an HttpOnly SameSite cookie on /login with the right token, which then works', async () => {
    const bad = await fetch(`${base}/login?token=wrong`, { redirect: 'manual' });
    expect(bad.status).toBe(401);
    const r = await fetch(`${base}/login?token=${TOKEN}`, { redirect: 'manual' });
    expect(r.status).toBe(303);
    const cookie = r.headers.get('set-cookie') ?? '';
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Strict/);
    const ok = await fetch(`${base}/api/workspaces`, { headers: { cookie: cookie.split(';')[0] ?? '' } });
    expect(ok.status).toBe(200);
    // A second grove_token sent first (one a same-site page set with a longer path) locks nobody out, and opens nothing.
    expect((await fetch(`${base}/api/workspaces`, { headers: { cookie: `grove_token=shadow; ${cookie.split(';')[0] ?? ''}` } })).status).toBe(200);
    expect((await fetch(`${base}/api/workspaces`, { headers: { cookie: 'grove_token=shadow; grove_token=%E0%A4%A' } })).status).toBe(401);
  });

  it('refuses writes and upgrades from a foreign Origin', async () => {
    const r = await fetch(`${base}/api/workspaces`, { method: 'POST', headers: { ...auth, origin: 'http://evil.example', 'content-type': 'application/json' }, body: JSON.stringify({ project: 'demo', name: 'x' }) });
    expect(r.status).toBe(403);
    expect((await readBody(r)).code).toBe('forbidden_origin');
    const res = await wsOpen(`${base.replace('http', 'ws')}/w/demo/stream`, { ...auth, origin: 'http://evil.example' });
    expect(res.status).toBe(403);
    const same = await wsOpen(`${base.replace('http', 'ws')}/w/demo/stream`, { ...auth, origin: base });
    expect(same.first).toBe('hello /stream');
  });
});

describe('registry API', () => {
  it('lists workspaces with capacity', async () => {
    const r = await fetch(`${base}/api/workspaces`, { headers: auth });
    const body = await readBody(r);
    expect(body.capacity).toEqual({ running: 1, creating: 0, cap: 2, queued: 0 });
    expect(body.workspaces?.map((w: Workspace) => w.slug)).toEqual(['demo', 'demo~off']);
  });

  it.each([
    ['../x', /only a-z/],
    ['a/b', /only a-z/],
    ['Upper', /lowercase/],
    ['x'.repeat(40), /at most 39/],
    ['', /must not be empty/],
    ['dеmo', /ASCII/],
    ['a~b', /only a-z/],
    ['-a', /start with a letter or digit/],
    ['default', /reserved/],
  ])('rejects the name %j with 422 saying which rule failed', async (name, rule) => {
    const before = forks.length;
    const r = await fetch(`${base}/api/workspaces`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ project: 'demo', name }) });
    expect(r.status).toBe(422);
    const body = await readBody(r);
    expect(body.code).toBe('invalid_name');
    expect(body.message).toMatch(rule);
    expect(forks.length).toBe(before);
  });

  it('rejects bodies that are not JSON or carry unknown fields', async () => {
    const notJson = await fetch(`${base}/api/workspaces`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{nope' });
    expect(notJson.status).toBe(422);
    expect((await readBody(notJson)).message).toMatch(/not valid JSON/);
    const extra = await fetch(`${base}/api/workspaces`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ project: 'demo', name: 'ok', rm: '-rf' }) });
    expect(extra.status).toBe(422);
    const badFrom = await fetch(`${base}/api/workspaces`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ project: 'demo', name: 'ok', from: '--upload-pack=x' }) });
    expect(badFrom.status).toBe(422);
    expect((await readBody(badFrom)).code).toBe('invalid_input');
  });

  it('answers the last message and the recent messages of a workspace, stopped or not, checked with the contracts schema', async () => {
    const stopped = await fetch(`${base}/api/workspaces/demo~off/last-message`, { headers: auth });
    expect(stopped.status).toBe(200);
    expect(lastMessageResponseSchema.parse(await stopped.json())).toEqual({ lastMessage: { who: 'agent', text: 'all green', at: '2026-01-01T00:00:00.000Z' } });
    expect(await (await fetch(`${base}/api/workspaces/demo/last-message`, { headers: auth })).json()).toEqual({ lastMessage: null });
    const missing = await fetch(`${base}/api/workspaces/demo~ghost/last-message`, { headers: auth });
    expect(missing.status).toBe(404);
    expect((await readBody(missing)).code).toBe('workspace_not_found');

    const recent = await fetch(`${base}/api/workspaces/demo~off/recent-messages`, { headers: auth });
    expect(recent.status).toBe(200);
    expect(recentMessagesResponseSchema.parse(await recent.json()).messages.map((m) => `${m.who}: ${m.text}`)).toEqual(['user: run the tests', 'agent: all green\n\n3 passed']);
    expect(await (await fetch(`${base}/api/workspaces/demo/recent-messages`, { headers: auth })).json()).toEqual({ messages: [] });
    const ghost = await fetch(`${base}/api/workspaces/demo~ghost/recent-messages`, { headers: auth });
    expect(ghost.status).toBe(404);
    expect((await readBody(ghost)).code).toBe('workspace_not_found');
    expect((await fetch(`${base}/api/workspaces/..%2Fx/last-message`, { headers: auth })).status).toBe(422);
    expect((await fetch(`${base}/api/workspaces/demo~off/last-message`)).status).toBe(401);
  });

  it('lists saved work and restores it as a new workspace; from accepts only recovery refs under refs/grove/', async () => {
    const post = (p: string, body: unknown) => fetch(`${base}${p}`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const saved = await fetch(`${base}/api/workspaces/demo~old/saved`, { headers: auth });
    expect(saved.status).toBe(200);
    expect((await readBody(saved)).saved).toEqual([{ ref: 'refs/grove/demo+old/teardown/1', n: 1, commit: 'a'.repeat(40) }]);
    const restored = await post('/api/workspaces/demo~old/restore', { name: 'back' });
    expect(restored.status).toBe(201);
    expect(forks.at(-1)).toEqual({ restore: 'demo~old', name: 'back' });
    expect((await post('/api/workspaces/demo~old/restore', { name: 'Bad' })).status).toBe(422);
    expect((await post('/api/workspaces/demo~old/restore', { name: 'ok', n: 0 })).status).toBe(422);
    expect((await post('/api/workspaces/demo~old/restore', { name: 'ok', from: 'main' })).status).toBe(422);
    const none = await post('/api/workspaces/demo~new/restore', { name: 'ok' });
    expect(none.status).toBe(404);
    expect((await readBody(none)).code).toBe('not_found');

    expect((await post('/api/workspaces', { project: 'demo', name: 'r1', from: 'refs/grove/demo+old/teardown/1' })).status).toBe(201);
    expect((await post('/api/workspaces', { project: 'demo', name: 'r2', from: 'refs/grove/demo/teardown/12' })).status).toBe(201);
    for (const from of ['refs/grove/demo+old/other/1', 'refs/grove/demo~old/teardown/1', 'refs/grove/demo+old/teardown/0', 'refs/grove/x/teardown/1/..', 'refs/grove/Demo/teardown/1']) {
      const r = await post('/api/workspaces', { project: 'demo', name: 'r3', from });
      expect(r.status, from).toBe(422);
    }
  });

  it('forks (201), and maps capacity_reached to 429 with running and cap', async () => {
    const ok = await fetch(`${base}/api/workspaces`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ project: 'demo', name: 'feat' }) });
    expect(ok.status).toBe(201);
    expect((await readBody(ok)).workspace?.slug).toBe('demo~feat');
    const full = await fetch(`${base}/api/workspaces`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ project: 'demo', name: 'full' }) });
    expect(full.status).toBe(429);
    expect(await readBody(full)).toMatchObject({ code: 'capacity_reached', running: 2, cap: 2 });
  });

  it('answers 202 with the place in line to a fork sent with queue: true that has to wait', async () => {
    const r = await fetch(`${base}/api/workspaces`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ project: 'demo', name: 'wait', queue: true }) });
    expect(r.status).toBe(202);
    const body = forkQueuedResponseSchema.parse(await r.json());
    expect(body).toMatchObject({ position: 2, workspace: { slug: 'demo~wait', state: 'queued', queuePosition: 2 }, events: '/api/events?slug=demo~wait' });
    expect(forks.at(-1)).toEqual({ project: 'demo', name: 'wait', queue: true });
    const bad = await fetch(`${base}/api/workspaces`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ project: 'demo', name: 'wait', queue: 'yes' }) });
    expect(bad.status).toBe(422);
  });

  it('sets a workspace\'s keepCheckoutOnClose with PATCH; forks from a pull request or a branch, not both', async () => {
    const patch = (body: string) => fetch(`${base}/api/workspaces/demo~feat`, { method: 'PATCH', headers: { ...auth, 'content-type': 'application/json' }, body });
    const ok = await patch(JSON.stringify({ keepCheckoutOnClose: true }));
    expect(ok.status).toBe(200);
    expect((await readBody(ok)).workspace).toMatchObject({ slug: 'demo~feat', keepCheckoutOnClose: true });
    expect(forks.at(-1)).toEqual({ update: 'demo~feat', keepCheckoutOnClose: true });
    expect((await patch(JSON.stringify({ keepCheckoutOnClose: null }))).status).toBe(200);
    for (const bad of [JSON.stringify({ keepCheckoutOnClose: 'yes' }), JSON.stringify({ state: 'gone' }), '{nope']) expect((await patch(bad)).status).toBe(422);
    const fork = (body: unknown) => fetch(`${base}/api/workspaces`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect((await fork({ project: 'demo', name: 'review', pullRequest: 7, keepCheckoutOnClose: true })).status).toBe(201);
    expect(forks.at(-1)).toEqual({ project: 'demo', name: 'review', pullRequest: 7, keepCheckoutOnClose: true });
    for (const bad of [{ pullRequest: 7, from: 'main' }, { pullRequest: 0 }, { pullRequest: '7' }]) expect((await fork({ project: 'demo', name: 'review', ...bad })).status).toBe(422);
  });

  it('reopens with no body (200), or waits in line with {queue: true} (202); other bodies are refused', async () => {
    const plain = await fetch(`${base}/api/workspaces/demo~off/start`, { method: 'POST', headers: auth });
    expect(plain.status).toBe(200);
    const queued = await fetch(`${base}/api/workspaces/demo~off/start`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ queue: true }) });
    expect(queued.status).toBe(202);
    expect(forkQueuedResponseSchema.parse(await queued.json())).toMatchObject({ position: 2, workspace: { slug: 'demo~off', state: 'queued' } });
    const extra = await fetch(`${base}/api/workspaces/demo~off/start`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ queue: true, now: 1 }) });
    expect(extra.status).toBe(422);
    const notJson = await fetch(`${base}/api/workspaces/demo~off/start`, { method: 'POST', headers: { ...auth, 'content-type': 'text/plain' }, body: 'queue' });
    expect(notJson.status).toBe(422);
  });

  it('answers 404 JSON for an unknown slug and an unknown route', async () => {
    const r = await fetch(`${base}/api/workspaces/demo~nope`, { headers: auth });
    expect(r.status).toBe(404);
    expect((await readBody(r)).code).toBe('workspace_not_found');
    const route = await fetch(`${base}/api/nothing`, { headers: auth });
    expect(route.status).toBe(404);
    expect((await readBody(route)).code).toBe('not_found');
  });
});

describe('proxy', () => {
  it('never passes the Grove token into a sandbox, and says where the workspace is mounted', async () => {
    const viaBearer = await fetch(`${base}/w/demo/headers`, { headers: { ...auth, cookie: 'app=1' } });
    const seen = (await viaBearer.json()) as Record<string, string | undefined>;
    expect(seen.authorization).toBeUndefined();
    expect(seen.cookie).toBe('app=1');
    expect(seen['x-forwarded-prefix']).toBe('/w/demo');
    const viaCookie = await fetch(`${base}/w/demo/headers`, { headers: { cookie: `grove_token=${TOKEN}`, 'x-forwarded-prefix': '/elsewhere' } });
    expect(viaCookie.status).toBe(200);
    const seen2 = (await viaCookie.json()) as Record<string, string | undefined>;
    expect(seen2.cookie).toBeUndefined();
    expect(seen2['x-forwarded-prefix']).toBe('/w/demo');
  });

  it('forwards /w/<slug>/… to the backend socket with the prefix stripped', async () => {
    const r = await fetch(`${base}/w/demo/thread?x=1`, { headers: auth });
    expect(r.status).toBe(200);
    expect(await readBody(r)).toEqual({ url: '/thread?x=1', method: 'GET' });
  });

  it('answers 404 for an unknown slug, 409 for a stopped one, 422 for a bad slug', async () => {
    const unknown = await fetch(`${base}/w/demo~ghost/health`, { headers: auth });
    expect(unknown.status).toBe(404);
    const stopped = await fetch(`${base}/w/demo~off/health`, { headers: auth });
    expect(stopped.status).toBe(409);
    const body = await readBody(stopped);
    expect(body.code).toBe('workspace_stopped');
    expect(body.message).toMatch(/start/);
    const bad = await fetch(`${base}/w/..%2F..%2Fetc/health`, { headers: auth });
    expect(bad.status).toBe(422);
  });

  it('proxies WebSocket upgrades', async () => {
    const res = await wsOpen(`${base.replace('http', 'ws')}/w/demo/stream`, auth);
    expect(res.first).toBe('hello /stream');
  });

  it("lets nothing a backend answers act on the dashboard's origin: no cookie, no site-data wipe, no script, no policy of its own", async () => {
    const r = await fetch(`${base}/w/demo/hostile`, { headers: auth });
    expect(r.status).toBe(200);
    expect(r.headers.getSetCookie()).toEqual([]);
    expect(r.headers.get('clear-site-data')).toBeNull();
    expect(r.headers.get('service-worker-allowed')).toBeNull();
    expect(r.headers.get('content-security-policy')).toBe("sandbox; default-src 'none'; frame-ancestors 'none'");
    expect(r.headers.get('x-frame-options')).toBe('DENY');
    expect(r.headers.get('x-content-type-options')).toBe('nosniff');
    // The body itself is passed on; the policy is what keeps its script from running on this origin.
    expect(await r.text()).toContain('<script>');
  });

  it("drops a backend's cookie from the WebSocket handshake, and passes on a refused upgrade without it", async () => {
    const handshake = await new Promise<http.IncomingHttpHeaders | null>((resolve) => {
      const s = new WebSocket(`${base.replace('http', 'ws')}/w/demo/stream`, { headers: auth });
      s.on('upgrade', (res) => resolve(res.headers));
      s.on('open', () => s.close());
      s.on('error', () => resolve(null));
    });
    expect(handshake?.['set-cookie']).toBeUndefined();
    // Its other headers pass as the bytes they were (node reads a header one char per byte), not encoded twice.
    expect(Buffer.from(String(handshake?.['x-name']), 'latin1').toString('utf8')).toBe('café');
    expect(await wsRefused(`${base.replace('http', 'ws')}/w/demo/refuse`, auth)).toEqual({ status: 403, cookie: undefined, body: 'nope' });
  });

  it('answers 502 backend_unavailable on an upgrade when the backend socket is gone', async () => {
    registry.set('demo~gone', { ...registry.get('demo')!, slug: 'demo~gone' });
    try {
      const res = await wsRefused(`${base.replace('http', 'ws')}/w/demo~gone/stream`, auth);
      expect(res.status).toBe(502);
      expect(JSON.parse(res.body)).toMatchObject({ code: 'backend_unavailable' });
    } finally {
      registry.delete('demo~gone');
    }
  });
});

describe('what the proxy connects to', () => {
  const as = (name: string) => registry.set(`demo~${name}`, { ...registry.get('demo')!, slug: `demo~${name}` });
  const listenOn = async (file: string, answer: string): Promise<{ server: http.Server; hits: () => number }> => {
    let hits = 0;
    const server = http.createServer((_req, res) => {
      hits++;
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(answer);
    });
    await new Promise<void>((r) => server.listen(file, r));
    return { server, hits: () => hits };
  };

  it('refuses a socket path that is a symbolic link (to the Docker engine, say), a regular file or a FIFO: 502, and nothing behind it is asked', async () => {
    // Stands in for /var/run/docker.sock: a socket the backend's path must never lead to.
    const engine = await listenOn(path.join(dir, 'engine.sock'), '{"ApiVersion":"1.41"}');
    try {
      fs.symlinkSync(path.join(dir, 'engine.sock'), path.join(dir, 'planted-link.sock'));
      fs.writeFileSync(path.join(dir, 'planted-file.sock'), 'not a socket');
      execFileSync('mkfifo', [path.join(dir, 'planted-fifo.sock')]);
      for (const [name, why] of [['planted-link', 'a symbolic link'], ['planted-file', 'not a socket'], ['planted-fifo', 'not a socket']] as const) {
        as(name);
        const r = await fetch(`${base}/w/demo~${name}/version`, { headers: auth });
        expect(r.status, name).toBe(502);
        expect(await r.json()).toMatchObject({ code: 'backend_unavailable', message: expect.stringContaining(why) as string });
        const ws = await wsRefused(`${base.replace('http', 'ws')}/w/demo~${name}/stream`, auth);
        expect(ws.status, name).toBe(502);
      }
      expect(engine.hits()).toBe(0);
    } finally {
      for (const name of ['planted-link', 'planted-file', 'planted-fifo']) registry.delete(`demo~${name}`);
      engine.server.close();
    }
  });

  it('lets a client go away mid-request without calling it a backend failure', async () => {
    as('slow');
    const file = path.join(dir, 'slow.sock');
    let seen!: () => void;
    const arrived = new Promise<void>((r) => (seen = r));
    let cut!: () => void;
    const upstreamClosed = new Promise<void>((r) => (cut = r));
    const server = http.createServer((req, res) => {
      seen();
      res.on('close', () => cut());
      // Never answers: the client leaves first.
    });
    await new Promise<void>((r) => server.listen(file, r));
    try {
      const before = errorLines.length;
      const ac = new AbortController();
      const req = fetch(`${base}/w/demo~slow/wait`, { headers: auth, signal: ac.signal });
      await arrived;
      ac.abort();
      await expect(req).rejects.toThrow();
      // The upstream request is cut too (nothing left running for a client that is gone) ...
      await upstreamClosed;
      await new Promise((r) => setTimeout(r, 50));
      // ... and nothing is logged as an error for it.
      expect(errorLines.slice(before)).toEqual([]);
    } finally {
      registry.delete('demo~slow');
      server.closeAllConnections();
      server.close();
    }
  });

  it('checks the socket whenever it opens a connection to it: once the file at the path is replaced, new connections reach the new one', async () => {
    as('swap');
    const file = path.join(dir, 'swap.sock');
    const first = await listenOn(file, 'first');
    let second: Awaited<ReturnType<typeof listenOn>> | null = null;
    // One client connection kept across the swap, and a new one for each of the other requests.
    const kept = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const text = (agent: http.Agent | false) =>
      new Promise<string>((resolve, reject) => {
        http
          .get(`${base}/w/demo~swap/x`, { agent, headers: auth }, (r) => {
            let body = '';
            r.setEncoding('utf8');
            r.on('data', (d: string) => (body += d));
            r.on('end', () => resolve(body));
          })
          .on('error', reject);
      });
    try {
      expect(await text(kept)).toBe('first');
      expect(await text(false)).toBe('first');
      // Replaced while the first server still holds the proxy's kept-alive connections.
      fs.rmSync(file);
      second = await listenOn(file, 'second');
      // node's path (a pool shared by all clients) drops its connections to the old socket; the fast lane opens a new
      // one for each new client connection, so neither reuses a connection to what is no longer at the path.
      for (let i = 0; i < 3; i++) expect(await text(false)).toBe('second');
      expect(await (await fetch(`${base}/w/demo~swap/x`, { method: 'POST', headers: auth, body: 'x' })).text()).toBe('second');
      // The lane's connection that a client connection keeps was checked when it was opened: it stays with that backend.
      expect(await text(kept)).toBe('first');
      expect([first.hits(), second.hits()]).toEqual([3, 4]);
    } finally {
      kept.destroy();
      registry.delete('demo~swap');
      first.server.closeAllConnections();
      first.server.close();
      second?.server.close();
    }
  });
});

describe('previews on their own origin', () => {
  const cap = previewCap(TOKEN, 'demo');

  it('redirects the signed-in /w/<slug>/preview/<port>/… to the preview listener, query kept; never proxies it here', async () => {
    const r = await fetch(`${base}/w/demo/preview/4173/src/a.js?v=1`, { headers: { cookie: `grove_token=${TOKEN}` }, redirect: 'manual' });
    expect(r.status).toBe(302);
    expect(r.headers.get('location')).toBe(`${previewBase}/pv/${cap}/demo/4173/src/a.js?v=1`);
    expect(r.headers.get('referrer-policy')).toBe('no-referrer');
    const bare = await fetch(`${base}/w/demo/preview/4173`, { headers: auth, redirect: 'manual' });
    expect(bare.headers.get('location')).toBe(`${previewBase}/pv/${cap}/demo/4173/`);
    // Not signed in: no redirect, so the cap is never handed out.
    expect((await fetch(`${base}/w/demo/preview/4173/`, { redirect: 'manual' })).status).toBe(401);
    const bad = await fetch(`${base}/w/demo/preview/0/`, { headers: auth, redirect: 'manual' });
    expect(bad.status).toBe(422);
    // The Host the browser used, with the preview port: localhost stays localhost.
    const other = await new Promise<http.IncomingMessage>((resolve) => http.get(`${base}/w/demo/preview/4173/`, { headers: { ...auth, host: `localhost:${new URL(base).port}` } }, resolve));
    expect(other.headers.location).toBe(`http://localhost:${new URL(previewBase).port}/pv/${cap}/demo/4173/`);
  });

  it('refuses a preview WebSocket on the dashboard origin, naming where it is served', async () => {
    const res = await wsRefused(`${base.replace('http', 'ws')}/w/demo/preview/4173/hmr`, auth);
    expect(res.status).toBe(404);
    expect(res.body).toContain(`ws://127.0.0.1:${new URL(previewBase).port}/pv/${cap}/demo/4173/hmr`);
  });

  it('serves /pv/<cap>/<slug>/<port>/… by the cap alone: no Grove credential reaches the sandbox, the prefix is its own', async () => {
    const r = await fetch(`${previewBase}/pv/${cap}/demo/4173/x?y=1`, { headers: { cookie: `grove_token=${TOKEN}; theme=dark`, authorization: `Bearer ${TOKEN}`, 'x-forwarded-prefix': '/w/demo' } });
    expect(r.status).toBe(200);
    const seen = (await r.json()) as { url: string; headers: Record<string, string | undefined> };
    expect(seen.url).toBe('/preview/4173/x?y=1');
    expect(seen.headers.cookie).toBe('theme=dark');
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers['x-forwarded-prefix']).toBe(`/pv/${cap}/demo`);
    // The cap does not leave in a Referer; the preview can neither shadow Grove's cookie nor widen a worker's scope.
    expect(r.headers.get('referrer-policy')).toBe('no-referrer');
    expect(r.headers.getSetCookie()).toEqual(['app=1; Path=/']);
    expect(r.headers.get('service-worker-allowed')).toBeNull();
    // No cookie at all is needed.
    expect((await fetch(`${previewBase}/pv/${cap}/demo/4173/`)).status).toBe(200);
  });

  it('proxies WebSocket upgrades on the preview listener by the cap', async () => {
    const res = await wsOpen(`${previewBase.replace('http', 'ws')}/pv/${cap}/demo/4173/hmr`, {});
    expect(res.first).toBe('hello /preview/4173/hmr');
    expect((await wsOpen(`${previewBase.replace('http', 'ws')}/pv/${previewCap(TOKEN, 'demo~off')}/demo/4173/hmr`, auth)).status).toBe(404);
  });

  it.each([
    ['a wrong cap', () => `/pv/${'A'.repeat(43)}/demo/4173/`],
    ["another slug's cap", () => `/pv/${previewCap(TOKEN, 'demo~off')}/demo/4173/`],
    ['/api, even with the token', () => '/api/workspaces'],
    ['/w, even with the token', () => '/w/demo/thread'],
    ['the dashboard', () => '/'],
    ['/login', () => `/login?token=${TOKEN}`],
  ])('answers 404 on the preview listener for %s', async (_what, p) => {
    const r = await fetch(`${previewBase}${p()}`, { headers: auth, redirect: 'manual' });
    expect(r.status).toBe(404);
    expect((await readBody(r)).code).toBe('not_found');
    expect(r.headers.get('set-cookie')).toBeNull();
  });

  it("refuses writes and upgrades from the preview origin on the dashboard's API, even with the cookie", async () => {
    const cookie = `grove_token=${TOKEN}`;
    const stop = await fetch(`${base}/api/workspaces/demo/stop`, { method: 'POST', headers: { cookie, origin: previewBase } });
    expect(stop.status).toBe(403);
    expect((await readBody(stop)).code).toBe('forbidden_origin');
    expect((await wsOpen(`${base.replace('http', 'ws')}/w/demo/stream`, { cookie, origin: previewBase })).status).toBe(403);
    // Reads carry no CORS header, so a preview's script cannot read them.
    const read = await fetch(`${base}/api/workspaces`, { headers: { cookie, origin: previewBase } });
    expect(read.headers.get('access-control-allow-origin')).toBeNull();
  });

  it("forbids framing of the dashboard's origin", async () => {
    const r = await fetch(`${base}/`, { headers: auth });
    expect(r.headers.get('x-frame-options')).toBe('DENY');
    expect(r.headers.get('content-security-policy')).toBe("frame-ancestors 'none'");
  });
});

describe('live events (SSE)', () => {
  it('streams lifecycle events as they happen, filtered by slug, and replays after Last-Event-ID', async () => {
    const ctrl = new AbortController();
    const r = await fetch(`${base}/api/events/stream?slug=demo~live`, { headers: { ...auth, 'last-event-id': '0' }, signal: ctrl.signal });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/text\/event-stream/);
    const reader = r.body!.getReader();
    let text = '';
    const until = async (pred: () => boolean) => {
      while (!pred()) {
        const { value, done } = await reader.read();
        if (done) break;
        text += new TextDecoder().decode(value);
      }
    };
    await new Promise((res) => setTimeout(res, 50));
    for (const l of listeners) l({ id: 7, slug: 'demo~other', type: 'workspace.reserved', data: {}, at: '' });
    for (const l of listeners) l({ id: 8, slug: 'demo~live', type: 'sandbox.started', data: { ms: 5 }, at: '' });
    await until(() => text.includes('sandbox.started'));
    expect(text).toContain('id: 8');
    expect(text).not.toContain('demo~other');
    ctrl.abort();

    const replay = new AbortController();
    const r2 = await fetch(`${base}/api/events/stream?slug=demo`, { headers: { ...auth, 'last-event-id': '1' }, signal: replay.signal });
    const reader2 = r2.body!.getReader();
    let text2 = '';
    while (!text2.includes('workspace.registered')) text2 += new TextDecoder().decode((await reader2.read()).value);
    expect(text2).toContain('id: 2');
    expect(text2).not.toContain('id: 1\n');
    replay.abort();
  });

  it('refuses the stream without a token', async () => {
    expect((await fetch(`${base}/api/events/stream`)).status).toBe(401);
  });
});
