// POST /api/projects, checkpoint, diff and publish: validation and shapes over an in-memory registry (the git
// behind them runs for real in packages/core/src/git-flow.test.ts).
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import type { Grove } from '@grove/core';
import type { AddProjectOptions } from '@grove/core';
import { GroveError, checkpointResponseSchema, diffResponseSchema, overlayListResponseSchema, projectSchema } from '@grove/contracts';
import { createApi } from './api.ts';

const calls: unknown[] = [];

const grove = {
  addProject: async (o: AddProjectOptions) => {
    calls.push({ addProject: o });
    if (o.name === 'taken') throw new GroveError('project_exists', 'project "taken" already exists');
    return { name: o.name, defaultBranch: 'main', createdAt: '2026-01-01T00:00:00.000Z' };
  },
  checkpoint: async (slug: string, req: unknown) => {
    calls.push({ checkpoint: slug, req });
    return { commit: 'c'.repeat(40), branch: 'grove/x', files: ['a.txt'] };
  },
  diff: async (slug: string, o: unknown) => {
    calls.push({ diff: slug, o });
    return { branch: 'grove/x', defaultBranch: 'main', base: 'b'.repeat(40), head: 'c'.repeat(40), uncommitted: false, ahead: 1, behind: 0, files: [], patch: '', truncated: false };
  },
  overlayFiles: async (project: string) => {
    calls.push({ overlayFiles: project });
    return { files: [{ path: '.env', writable: false, size: 3 }] };
  },
  putOverlayFile: async (project: string, req: unknown) => {
    calls.push({ putOverlayFile: project, req });
    return { files: [{ path: '.env', writable: false, size: 3 }] };
  },
  deleteOverlayFile: async (project: string, path: unknown) => {
    calls.push({ deleteOverlayFile: project, path });
    return { files: [] };
  },
  publish: async (slug: string, req: unknown) => {
    calls.push({ publish: slug, req });
    throw new GroveError('push_rejected', 'pushing grove/x failed: the remote branch has commits this branch does not', { details: { reason: 'non_fast_forward' } });
  },
} as unknown as Grove;

const app = createApi({ grove, logger: pino({ level: 'silent' }) });
const json = (method: string, body: unknown) => ({ method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('git flow API', () => {
  it('POST /api/projects answers 201 with the project, refusing sources git must never see', async () => {
    calls.length = 0;
    const ok = await app.request('/api/projects', json('POST', { name: 'app', source: 'git@forge.example:team/app.git' }));
    expect(ok.status).toBe(201);
    expect(projectSchema.parse(((await ok.json()) as { project: unknown }).project)).toMatchObject({ name: 'app', defaultBranch: 'main' });
    expect(calls).toEqual([{ addProject: { name: 'app', source: 'git@forge.example:team/app.git', createDefault: false, failIfExists: true } }]);

    for (const source of ['--upload-pack=x', 'ext::sh -c id', 'file:///a\u0007b', 'relative/dir', 'https://u:p@host/r.git']) {
      const r = await app.request('/api/projects', json('POST', { name: 'app', source }));
      expect(r.status, source).toBe(422);
      expect(await r.json()).toMatchObject({ code: 'invalid_input' });
    }
    const badName = await app.request('/api/projects', json('POST', { name: 'App', source: '/srv/app' }));
    expect(await badName.json()).toMatchObject({ code: 'invalid_name' });
    expect((await app.request('/api/projects', json('POST', { name: 'taken', source: '/srv/app' }))).status).toBe(409);
    expect((await app.request('/api/projects', json('POST', { name: 'x', source: '/srv/app', extra: 1 }))).status).toBe(422);
    expect(calls).toHaveLength(2);
  });

  it('overlay routes take one plain path and its text, refusing git plumbing, escapes and globs before core sees them', async () => {
    calls.length = 0;
    const list = await app.request('/api/projects/demo/overlay');
    expect(overlayListResponseSchema.parse(await list.json()).files).toEqual([{ path: '.env', writable: false, size: 3 }]);
    expect((await app.request('/api/projects/demo/overlay', json('PUT', { path: '.env', content: 'A=1\n' }))).status).toBe(200);
    expect((await app.request('/api/projects/demo/overlay?path=.env', { method: 'DELETE' })).status).toBe(200);
    expect(calls).toEqual([{ overlayFiles: 'demo' }, { putOverlayFile: 'demo', req: { path: '.env', content: 'A=1\n' } }, { deleteOverlayFile: 'demo', path: '.env' }]);

    for (const path of ['.git/config', '../x', '/etc/passwd', '.gitattributes', '.claude/*', 'a//b', 'x\ny']) {
      const put = await app.request('/api/projects/demo/overlay', json('PUT', { path, content: '' }));
      expect(put.status, path).toBe(422);
      expect(await put.json()).toMatchObject({ code: 'invalid_input' });
      expect((await app.request(`/api/projects/demo/overlay?path=${encodeURIComponent(path)}`, { method: 'DELETE' })).status, path).toBe(422);
    }
    expect((await app.request('/api/projects/demo/overlay', json('PUT', { path: '.env', content: 'x'.repeat(1024 * 1024 + 1) }))).status).toBe(422);
    expect((await app.request('/api/projects/demo/overlay', json('PUT', { path: '.env' }))).status).toBe(422);
    expect((await app.request('/api/projects/Bad/overlay')).status).toBe(422);
    expect(calls).toHaveLength(3);
  });

  it('checkpoint takes an optional body; diff takes maxBytes; publish errors keep their code', async () => {
    calls.length = 0;
    const bare = await app.request('/api/workspaces/demo~x/checkpoint', { method: 'POST' });
    expect(checkpointResponseSchema.parse(await bare.json()).files).toEqual(['a.txt']);
    await app.request('/api/workspaces/demo~x/checkpoint', json('POST', { message: 'wip' }));
    expect((await app.request('/api/workspaces/demo~x/checkpoint', json('POST', { message: 'x', force: true }))).status).toBe(422);
    // Core takes the parsed request: an empty message is refused here, before it.
    const empty = await app.request('/api/workspaces/demo~x/checkpoint', json('POST', { message: '' }));
    expect(empty.status).toBe(422);
    expect(await empty.json()).toMatchObject({ code: 'invalid_input', message: expect.stringContaining('message must not be empty') as string });
    expect((await app.request('/api/workspaces/demo~x/publish', json('POST', { title: '' }))).status).toBe(422);
    expect(diffResponseSchema.parse(await (await app.request('/api/workspaces/demo~x/diff?maxBytes=4096')).json()).ahead).toBe(1);
    expect((await app.request('/api/workspaces/demo~x/diff?maxBytes=1')).status).toBe(422);
    const pub = await app.request('/api/workspaces/demo~x/publish', json('POST', { title: 'T' }));
    expect(pub.status).toBe(409);
    expect(await pub.json()).toMatchObject({ code: 'push_rejected', reason: 'non_fast_forward' });
    expect(calls).toEqual([
      { checkpoint: 'demo~x', req: {} },
      { checkpoint: 'demo~x', req: { message: 'wip' } },
      { diff: 'demo~x', o: { maxBytes: 4096 } },
      { publish: 'demo~x', req: { title: 'T' } },
    ]);
  });
});
