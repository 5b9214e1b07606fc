import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GroveError } from '@grove/contracts';
import { ApiError, createClient } from './client.ts';
import { loadCliEnv, type CliEnv } from './env.ts';

// A real HTTP server on loopback answers like Grove's routes do; the registry logic is tested elsewhere.
const seen: string[] = [];
const at = '2026-01-01T00:00:00.000Z';
const ws = { slug: 'demo~x', project: 'demo', name: 'x', isDefault: false, branch: 'grove/x', baseRef: 'main', state: 'creating', failureReason: null, agentSessionId: null, createdAt: at, updatedAt: at, lastActivityAt: null, queuePosition: null };
const server = http.createServer((req, res) => {
  seen.push(`${req.method} ${req.url} ${req.headers.authorization ?? '-'}`);
  const send = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  if (req.url === '/api/workspaces?wait=false') return send(202, { workspace: ws, events: '/api/events?slug=demo~x' });
  if (req.url === '/api/workspaces/demo~x') return send(200, { workspace: { slug: 'demo~x' } });
  if (req.url?.startsWith('/api/events')) return send(429, { code: 'capacity_reached', message: 'all 2 sandboxes are in use', cap: 2 });
  res.writeHead(502).end('bad gateway');
});
let env: CliEnv;

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  env = loadCliEnv({ NODE_ENV: 'test', GROVE_URL: url, GROVE_TOKEN: 'tok', GROVE_HOME: '/nonexistent' });
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe('the CLI client', () => {
  it('calls the table with the token and parses the answer with its schema', async () => {
    const { api } = createClient(env);
    const accepted = await api.fork({ query: { wait: 'false' }, body: { project: 'demo', name: 'x' } });
    expect(accepted).toMatchObject({ workspace: { slug: 'demo~x' }, events: '/api/events?slug=demo~x' });
    expect(seen.at(-1)).toBe('POST /api/workspaces?wait=false Bearer tok');
  });

  it('turns every failure into the error the commands know', async () => {
    const { api } = createClient(env);
    const full = await api.events({ query: { slug: 'demo' } }).catch((e: unknown) => e);
    expect(full).toBeInstanceOf(ApiError);
    expect(full).toMatchObject({ status: 429, code: 'capacity_reached', message: 'all 2 sandboxes are in use', body: { code: 'capacity_reached', cap: 2 } });
    await expect(api.projectConfig({ params: { project: 'demo' } })).rejects.toMatchObject({ status: 502, code: 'internal', message: 'Grove answered 502' });
    const bad = await api.getWorkspace({ params: { slug: 'demo~x' } }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(GroveError);
    expect((bad as Error).message).toMatch(/^unexpected response from GET \/api\/workspaces\/demo~x: /);

    const down = createClient({ ...env, url: 'http://127.0.0.1:9' });
    await expect(down.api.getWorkspace({ params: { slug: 'demo' } })).rejects.toMatchObject({
      status: 0,
      code: 'unreachable',
      message: expect.stringMatching(/^cannot reach Grove at http:\/\/127\.0\.0\.1:9 .*grove up/) as string,
    });
  });
});
