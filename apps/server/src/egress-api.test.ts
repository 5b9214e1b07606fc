// GET/PUT/DELETE /api/workspaces/:slug/egress: the routes' validation and shapes, over an in-memory registry
// (the policy's effect on a real gate is tested in packages/core and e2e/egress.test.ts).
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import type { Grove } from '@grove/core';
import { GroveError, egressPolicySchema, egressResponseSchema } from '@grove/contracts';
import type { EgressPolicy, GroveEvent } from '@grove/contracts';
import { createApi } from './api.ts';

const policies = new Map<string, EgressPolicy | null>([['demo', null]]);
const decision: GroveEvent = {
  id: 7,
  slug: 'demo',
  type: 'egress.denied',
  data: { method: 'CONNECT', host: '10.0.0.1', port: 80, address: '10.0.0.1', decision: 'deny', rule: 'blocked-address:private', reason: 'x', status: 403, bytesIn: 0, bytesOut: 0, durationMs: 1 },
  at: new Date().toISOString(),
};
const limits: Array<number | undefined> = [];

function known(slug: string): void {
  if (!policies.has(slug)) throw new GroveError('workspace_not_found', `no workspace "${slug}"`);
}

// Only the egress methods are reached by these routes.
const grove = {
  egress: async (slug: string, opts?: { limit?: number }) => {
    known(slug);
    limits.push(opts?.limit);
    const p = policies.get(slug) ?? null;
    return { policy: p ?? { rules: [] }, source: p ? 'workspace' : 'default', decisions: [decision] };
  },
  setEgressPolicy: async (slug: string, input: unknown) => {
    known(slug);
    const p = egressPolicySchema.parse(input);
    policies.set(slug, p);
    return p;
  },
  resetEgressPolicy: async (slug: string) => {
    known(slug);
    policies.set(slug, null);
    return { rules: [] };
  },
} as unknown as Grove;

const app = createApi({ grove, logger: pino({ level: 'silent' }) });
const put = (slug: string, body: unknown, type = 'application/json') =>
  app.request(`/api/workspaces/${slug}/egress`, { method: 'PUT', headers: { 'content-type': type }, body: typeof body === 'string' ? body : JSON.stringify(body) });

describe('egress API', () => {
  it('GET answers the policy, its source and the recent decisions', async () => {
    const r = await app.request('/api/workspaces/demo/egress?limit=5');
    expect(r.status).toBe(200);
    const body = egressResponseSchema.parse(await r.json());
    expect(body).toMatchObject({ policy: { rules: [] }, source: 'default' });
    expect(body.decisions[0]?.data).toMatchObject({ rule: 'blocked-address:private' });
    expect(limits.at(-1)).toBe(5);
  });

  it('PUT validates, canonicalizes and answers the new policy', async () => {
    const r = await put('demo', { rules: [{ host: 'API.Example.com.', ports: [443, 443] }, { host: '*.pkg.example', ports: [443] }] });
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ policy: { rules: [{ host: 'api.example.com', ports: [443] }, { host: '*.pkg.example', ports: [443] }] } });
    const after = egressResponseSchema.parse(await (await app.request('/api/workspaces/demo/egress')).json());
    expect(after.source).toBe('workspace');
  });

  it('DELETE resets to the project default and answers it', async () => {
    expect((await put('demo', { rules: [{ host: 'a.example', ports: [443] }] })).status).toBe(200);
    const r = await app.request('/api/workspaces/demo/egress', { method: 'DELETE' });
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ policy: { rules: [] }, source: 'default' });
    const after = egressResponseSchema.parse(await (await app.request('/api/workspaces/demo/egress')).json());
    expect(after.source).toBe('default');
    expect((await app.request('/api/workspaces/nope/egress', { method: 'DELETE' })).status).toBe(404);
    expect((await app.request('/api/workspaces/..%2Fx/egress', { method: 'DELETE' })).status).toBe(422);
  });

  it.each([
    [{ rules: [{ host: '*.com', ports: [443] }] }, /at least two labels/],
    [{ rules: [{ host: 'a.example', ports: [0] }] }, /between 1 and 65535/],
    [{ rules: [{ host: 'a.example', ports: [65536] }] }, /between 1 and 65535/],
    [{ rules: [{ host: '127.1', ports: [80] }] }, /looks like an IP address/],
    [{ rules: [{ host: 'a b', ports: [80] }] }, /not a hostname/],
    [{ rules: [{ host: 'a.example', ports: [] }] }, /at least one port/],
    [{ rules: [], allowAll: true }, /Unrecognized key/i],
    [{}, /rules/],
  ])('PUT refuses %j with 422 naming the rule', async (body, message) => {
    const r = await put('demo', body);
    expect(r.status).toBe(422);
    const err = (await r.json()) as { code: string; message: string };
    expect(err.code).toBe('invalid_input');
    expect(err.message).toMatch(message);
  });

  it('PUT refuses a body that is not JSON, and unknown or invalid slugs', async () => {
    expect((await put('demo', 'rules', 'text/plain')).status).toBe(422);
    expect((await put('nope', { rules: [] })).status).toBe(404);
    expect((await app.request('/api/workspaces/nope/egress')).status).toBe(404);
    expect((await app.request('/api/workspaces/..%2Fx/egress')).status).toBe(422);
    expect((await app.request('/api/workspaces/demo/egress?limit=0')).status).toBe(422);
  });
});
