// The server's routes and @grove/client agree, endpoint by endpoint of the contracts' table: every call the client
// makes reaches the route of the same entry, which hands the parsed input to the matching Grove method.
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import type { Grove } from '@grove/core';
import { GroveError, endpoints, type Workspace } from '@grove/contracts';
import { createClient, type GroveCalls } from '@grove/client';
import { createApi } from './api.ts';

const calls: Array<{ method: string; args: unknown[] }> = [];

function workspace(slug: string, state: Workspace['state']): Workspace {
  const at = '2026-01-01T00:00:00.000Z';
  return { slug, project: 'demo', name: slug.split('~')[1] ?? 'default', isDefault: !slug.includes('~'), branch: `grove/${slug}`, baseRef: 'main', state, failureReason: null, agentSessionId: null, createdAt: at, updatedAt: at, lastActivityAt: null, queuePosition: state === 'queued' ? 3 : null };
}

// A Grove whose every method says what it was called with (as a GroveError the client turns back into one),
// except the few the success cases below need.
const answers: Partial<Record<keyof Grove, (...args: never[]) => unknown>> = {
  get: (slug: string) => workspace(slug, 'running'),
  start: (slug: string, o: { queue: boolean }) => workspace(slug, o.queue ? 'queued' : 'running'),
  fork: (req: { project: string; name: string }) => workspace(`${req.project}~${req.name}`, 'creating'),
  ensureDefault: (project: string) => ({ workspace: workspace(project, project === 'busy' ? 'queued' : 'creating'), created: project !== 'demo' }),
  // Not what the table promises: the server must refuse to send it.
  listProjects: () => [{ name: 'demo' }],
};
const grove = new Proxy({} as Grove, {
  get: (_, method: string) => {
    return async (...args: unknown[]) => {
      calls.push({ method, args });
      const answer = answers[method as keyof Grove];
      if (answer) return answer(...(args as never[]));
      throw new GroveError('invalid_state', `called ${method}`);
    };
  },
});

const app = createApi({ grove, logger: pino({ level: 'silent' }), previewUrl: (host, s, port) => `http://preview.test/pv/cap/${s}/${port}/?host=${host ?? ''}` });
const client = createClient({ baseUrl: 'http://grove.test', fetch: async (url, init) => app.fetch(new Request(url, init)) });

type Case = { [K in keyof GroveCalls]: { call: () => Promise<unknown>; grove: keyof Grove; args: unknown[] } };
const slug = 'demo~x';
const policy = { rules: [{ host: 'example.com', ports: [443] }] };
const cases: Omit<Case, 'health' | 'getWorkspace' | 'start' | 'listProjects' | 'previewUrl'> = {
  addProject: { call: () => client.addProject({ body: { name: 'app', source: '/srv/app' } }), grove: 'addProject', args: [{ name: 'app', source: '/srv/app', createDefault: false, failIfExists: true }] },
  ensureDefault: { call: () => client.ensureDefault({ params: { project: 'demo' } }), grove: 'ensureDefault', args: ['demo'] },
  projectConfig: { call: () => client.projectConfig({ params: { project: 'demo' } }), grove: 'projectConfig', args: ['demo'] },
  setProjectConfig: { call: () => client.setProjectConfig({ params: { project: 'demo' }, body: { allowedPaths: ['src/'] } }), grove: 'setProjectConfig', args: ['demo', { allowedPaths: ['src/'] }] },
  patchProjectConfig: { call: () => client.patchProjectConfig({ params: { project: 'demo' }, body: { forge: null } }), grove: 'patchProjectConfig', args: ['demo', { forge: null }] },
  overlay: { call: () => client.overlay({ params: { project: 'demo' } }), grove: 'overlayFiles', args: ['demo'] },
  putOverlayFile: { call: () => client.putOverlayFile({ params: { project: 'demo' }, body: { path: '.env', content: 'A=1' } }), grove: 'putOverlayFile', args: ['demo', { path: '.env', content: 'A=1' }] },
  deleteOverlayFile: { call: () => client.deleteOverlayFile({ params: { project: 'demo' }, query: { path: '.claude/a.json' } }), grove: 'deleteOverlayFile', args: ['demo', '.claude/a.json'] },
  listWorkspaces: { call: () => client.listWorkspaces({ query: { project: 'demo', all: '1' } }), grove: 'list', args: [{ project: 'demo', includeGone: true }] },
  fork: { call: () => client.fork({ body: { project: 'demo', name: 'full' } }), grove: 'fork', args: [{ project: 'demo', name: 'full' }, { wait: true }] },
  updateWorkspace: { call: () => client.updateWorkspace({ params: { slug }, body: { keepCheckoutOnClose: null } }), grove: 'update', args: [slug, { keepCheckoutOnClose: null }] },
  teardown: { call: () => client.teardown({ params: { slug } }), grove: 'teardown', args: [slug] },
  stop: { call: () => client.stop({ params: { slug } }), grove: 'stop', args: [slug] },
  lastMessage: { call: () => client.lastMessage({ params: { slug } }), grove: 'lastMessage', args: [slug] },
  recentMessages: { call: () => client.recentMessages({ params: { slug } }), grove: 'recentMessages', args: [slug] },
  teardownPreview: { call: () => client.teardownPreview({ params: { slug } }), grove: 'teardownPreview', args: [slug] },
  savedWork: { call: () => client.savedWork({ params: { slug } }), grove: 'savedWork', args: [slug] },
  restore: { call: () => client.restore({ params: { slug }, query: { wait: 'false' }, body: { name: 'back', n: 2 } }), grove: 'restore', args: [slug, { name: 'back', n: 2 }, { wait: false }] },
  egress: { call: () => client.egress({ params: { slug }, query: { limit: 5 } }), grove: 'egress', args: [slug, { limit: 5 }] },
  setEgressPolicy: { call: () => client.setEgressPolicy({ params: { slug }, body: policy }), grove: 'setEgressPolicy', args: [slug, policy] },
  resetEgress: { call: () => client.resetEgress({ params: { slug } }), grove: 'resetEgressPolicy', args: [slug] },
  undo: { call: () => client.undo({ params: { slug } }), grove: 'undo', args: [slug] },
  turns: { call: () => client.turns({ params: { slug } }), grove: 'turns', args: [slug] },
  turnDiff: { call: () => client.turnDiff({ params: { slug, n: 12 } }), grove: 'turnDiff', args: [slug, 12] },
  checkpoint: { call: () => client.checkpoint({ params: { slug } }), grove: 'checkpoint', args: [slug, {}] },
  diff: { call: () => client.diff({ params: { slug }, query: { maxBytes: 4096 } }), grove: 'diff', args: [slug, { maxBytes: 4096 }] },
  publish: { call: () => client.publish({ params: { slug }, body: { title: 'T' } }), grove: 'publish', args: [slug, { title: 'T' }] },
  pullRequest: { call: () => client.pullRequest({ params: { slug } }), grove: 'pullRequest', args: [slug] },
  events: { call: () => client.events({ query: { slug, after: 4, limit: 10 } }), grove: 'events', args: [{ slug, after: 4, limit: 10 }] },
};

describe('server routes and @grove/client, from one table', () => {
  it('covers every JSON endpoint of the table here', () => {
    const covered = [...Object.keys(cases), 'health', 'getWorkspace', 'start', 'listProjects', 'previewUrl'].sort();
    expect(covered).toEqual(Object.entries(endpoints).flatMap(([name, e]) => ('stream' in e ? [] : [name])).sort());
  });

  it.each(Object.entries(cases))('%s reaches its Grove method with the parsed input', async (_, c) => {
    calls.length = 0;
    // Fork without a slot answers 201 through the stub; the others reach a Grove method that refuses.
    const outcome = await c.call().then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    if ('error' in outcome) expect(outcome.error).toMatchObject({ code: 'invalid_state', message: `called ${c.grove}` });
    expect(calls).toEqual([{ method: c.grove, args: c.args }]);
  });

  it('answers each success status with its schema, parsed by the client', async () => {
    expect(await client.health()).toEqual({ ok: true });
    expect((await client.getWorkspace({ params: { slug: 'demo' } })).workspace.state).toBe('running');
    expect(await client.start({ params: { slug: 'demo~q' }, body: { queue: true } })).toMatchObject({ position: 3, events: '/api/events?slug=demo~q' });
    expect(await client.fork({ body: { project: 'demo', name: 'bg' }, query: { wait: '0' } })).toMatchObject({ workspace: { slug: 'demo~bg', state: 'creating' }, events: '/api/events?slug=demo~bg' });
    // A project's default: the live one (200), one begun now (202), or in line at the cap (202 with its place).
    expect(await client.ensureDefault({ params: { project: 'demo' } })).toEqual({ workspace: workspace('demo', 'creating') });
    expect(await client.ensureDefault({ params: { project: 'app' } })).toEqual({ workspace: workspace('app', 'creating'), events: '/api/events?slug=app' });
    expect(await client.ensureDefault({ params: { project: 'busy' } })).toMatchObject({ position: 3, workspace: { slug: 'busy', state: 'queued' } });
    // The preview address is built for a workspace that exists (looked up first) and the request's own Host.
    calls.length = 0;
    expect(await client.previewUrl({ params: { slug, port: 4173 } })).toEqual({ port: 4173, url: 'http://preview.test/pv/cap/demo~x/4173/?host=grove.test' });
    expect(calls).toEqual([{ method: 'get', args: [slug] }]);
  });

  it('refuses to send an answer its table entry does not allow', async () => {
    await expect(client.listProjects()).rejects.toMatchObject({ code: 'internal', status: 500, message: expect.stringContaining('GET /api/projects') as string });
  });

  it('refuses bad input before any Grove method runs, with the codes of the table', async () => {
    calls.length = 0;
    await expect(client.getWorkspace({ params: { slug: '../x' } })).rejects.toMatchObject({ code: 'invalid_name', message: expect.stringMatching(/^invalid workspace slug: /) as string });
    await expect(client.turnDiff({ params: { slug, n: 0 } })).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringMatching(/^invalid turn number: /) as string });
    await expect(client.fork({ body: { project: 'demo', name: 'Bad' } })).rejects.toMatchObject({ code: 'invalid_name', message: expect.stringMatching(/^invalid workspace request: name: name must be lowercase/) as string });
    await expect(client.previewUrl({ params: { slug, port: 0 } })).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringMatching(/^invalid port: /) as string });
    await expect(client.egress({ params: { slug }, query: { limit: 0 } })).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringMatching(/^invalid query: limit/) as string });
    expect(calls).toEqual([]);
  });
});
