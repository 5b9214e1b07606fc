// POST /api/workspaces/:slug/undo, GET /turns and /turns/:n/diff, and GET/PUT/PATCH /api/projects/:project/config: validation and shapes over an
// in-memory registry (undo and configs for real: packages/core/src/agents.docker.test.ts).
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import type { Grove } from '@grove/core';
import { GroveError, projectConfigResponseSchema, projectConfigSchema, turnDiffResponseSchema, turnsResponseSchema, undoResponseSchema } from '@grove/contracts';
import type { TurnSummary } from '@grove/contracts';
import type { ProjectConfig } from '@grove/contracts';
import { createApi } from './api.ts';
import { parseProxyPath } from './proxy.ts';

const configs = new Map<string, ProjectConfig>([['demo', {}]]);
let undone = 0;
const diffCalls: number[] = [];

const grove = {
  projectConfig: async (project: string) => {
    const c = configs.get(project);
    if (!c) throw new GroveError('project_not_found', `no project "${project}"`);
    return c;
  },
  setProjectConfig: async (project: string, input: unknown) => {
    if (!configs.has(project)) throw new GroveError('project_not_found', `no project "${project}"`);
    const c = projectConfigSchema.parse(input);
    configs.set(project, c);
    return c;
  },
  patchProjectConfig: async (project: string, patch: Record<string, unknown>) => {
    const c = configs.get(project);
    if (!c) throw new GroveError('project_not_found', `no project "${project}"`);
    const next = projectConfigSchema.parse(Object.fromEntries(Object.entries({ ...c, ...patch }).filter(([, v]) => v !== null)));
    configs.set(project, next);
    return next;
  },
  undo: async (slug: string) => {
    if (slug !== 'demo') throw new GroveError('workspace_not_found', `no workspace "${slug}"`);
    if (undone >= 2) throw new GroveError('invalid_state', 'nothing to undo');
    undone++;
    return { undone: { turn: `turn-${3 - undone}`, ref: `refs/grove/demo/undone/${3 - undone}`, files: ['a.txt'] }, remaining: 2 - undone };
  },
  turns: async (slug: string): Promise<TurnSummary[]> => {
    if (slug !== 'demo') throw new GroveError('workspace_not_found', `no workspace "${slug}"`);
    const at = new Date().toISOString();
    return [{ n: 2, turn: 'turn-2', at, recorded: true, files: [{ path: 'a.txt', status: 'modified', added: 1, removed: 0 }], reverted: [], allowedPaths: [], undone: false, undoNext: true }];
  },
  turnDiff: async (slug: string, n: number) => {
    diffCalls.push(n);
    if (n !== 2) throw new GroveError('not_found', `workspace "${slug}" has no recorded changes for turn ${n}`);
    return { n, turn: `turn-${n}`, diff: 'diff --git a/a.txt b/a.txt\n+x\n', truncated: false, limitBytes: 1024 };
  },
} as unknown as Grove;

const app = createApi({ grove, logger: pino({ level: 'silent' }) });
const json = (method: string, body: unknown) => ({ method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('agents API', () => {
  it('PUT validates a project config and GET answers it with the defaults applied', async () => {
    const put = await app.request('/api/projects/demo/config', json('PUT', { agent: { provider: 'claude' }, allowedPaths: ['src/**'] }));
    expect(put.status).toBe(200);
    expect(projectConfigResponseSchema.parse(await put.json())).toEqual({
      config: { agent: { provider: 'claude', permissionMode: 'bypassPermissions', env: {} }, allowedPaths: ['src/**'] },
    });
    const get = await app.request('/api/projects/demo/config');
    expect(projectConfigResponseSchema.parse(await get.json()).config.allowedPaths).toEqual(['src/**']);
  });

  it('refuses an unknown provider, a glob out of the workspace and a secret in the agent env', async () => {
    for (const [body, text] of [
      [{ agent: { provider: 'codex' } }, 'unknown agent provider'],
      [{ allowedPaths: ['../etc/**'] }, 'must not contain ".."'],
      [{ agent: { provider: 'claude', env: { ANTHROPIC_API_KEY: 'sk-x' } } }, 'secrets never go into a sandbox'],
    ] as const) {
      const r = await app.request('/api/projects/demo/config', json('PUT', body));
      expect(r.status).toBe(422);
      expect(await r.json()).toMatchObject({ code: 'invalid_input', message: expect.stringContaining(text) });
    }
    expect((await app.request('/api/projects/Bad_Name/config')).status).toBe(422);
    expect((await app.request('/api/projects/nope/config')).status).toBe(404);
  });

  it('PATCH changes the keys given and refuses an unknown key or a bad value before it reaches the project', async () => {
    const r = await app.request('/api/projects/demo/config', json('PATCH', { keepCheckoutOnClose: true }));
    expect(r.status).toBe(200);
    expect(projectConfigResponseSchema.parse(await r.json()).config).toMatchObject({ keepCheckoutOnClose: true, allowedPaths: ['src/**'] });
    for (const [body, text] of [
      [{ keep: true }, 'keep'],
      [{ keepCheckoutOnClose: 'yes' }, 'keepCheckoutOnClose'],
      [{ allowedPaths: ['../x'] }, 'must not contain ".."'],
    ] as const) {
      const bad = await app.request('/api/projects/demo/config', json('PATCH', body));
      expect(bad.status).toBe(422);
      expect(await bad.json()).toMatchObject({ code: 'invalid_input', message: expect.stringContaining(text) });
    }
    expect((await app.request('/api/projects/nope/config', json('PATCH', {}))).status).toBe(404);
    expect(configs.get('demo')?.keepCheckoutOnClose).toBe(true);
  });

  it('POST undo answers what was undone, twice, then 409', async () => {
    const first = await app.request('/api/workspaces/demo/undo', { method: 'POST' });
    expect(first.status).toBe(200);
    expect(undoResponseSchema.parse(await first.json())).toMatchObject({ undone: { turn: 'turn-2' }, remaining: 1 });
    expect(undoResponseSchema.parse(await (await app.request('/api/workspaces/demo/undo', { method: 'POST' })).json())).toMatchObject({ remaining: 0 });
    const third = await app.request('/api/workspaces/demo/undo', { method: 'POST' });
    expect(third.status).toBe(409);
    expect((await app.request('/api/workspaces/nope/undo', { method: 'POST' })).status).toBe(404);
  });
});

describe('turns API', () => {
  it('GET /turns answers the turns; GET /turns/:n/diff the diff of one', async () => {
    const list = await app.request('/api/workspaces/demo/turns');
    expect(list.status).toBe(200);
    expect(turnsResponseSchema.parse(await list.json()).turns[0]).toMatchObject({ n: 2, undoNext: true, files: [{ path: 'a.txt', status: 'modified' }] });
    expect((await app.request('/api/workspaces/nope/turns')).status).toBe(404);
    const diff = await app.request('/api/workspaces/demo/turns/2/diff');
    expect(diff.status).toBe(200);
    expect(turnDiffResponseSchema.parse(await diff.json())).toMatchObject({ n: 2, truncated: false, diff: expect.stringContaining('+x') as string });
    const unknown = await app.request('/api/workspaces/demo/turns/9/diff');
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ code: 'not_found', message: expect.stringContaining('turn 9') as string });
  });

  it('refuses a turn number that is not a plain positive integer before asking core', async () => {
    diffCalls.length = 0;
    for (const n of ['0', '-1', '01', '1e3', 'abc', '2.5', '9999999999']) {
      const r = await app.request(`/api/workspaces/demo/turns/${n}/diff`);
      expect(r.status, n).toBe(422);
      expect(await r.json()).toMatchObject({ code: 'invalid_input', message: expect.stringContaining('turn number') as string });
    }
    expect(diffCalls).toEqual([]);
    expect((await app.request('/api/workspaces/Bad_Slug/turns')).status).toBe(422);
  });
});

describe('host-only backend routes', () => {
  it('are not reachable through /w/<slug>/, however the path is spelled', () => {
    for (const url of ['/w/demo/hold', '/w/demo/hold/release', '/w/demo~x/notes', '/w/demo/./notes', '/w/demo/x/../hold?y=1']) {
      expect(() => parseProxyPath(url), url).toThrow(expect.objectContaining({ code: 'not_found' }));
    }
    expect(parseProxyPath('/w/demo/thread')).toEqual({ slug: 'demo', path: '/thread' });
    expect(parseProxyPath('/w/demo/notes-app/index.html')).toEqual({ slug: 'demo', path: '/notes-app/index.html' });
  });
});
