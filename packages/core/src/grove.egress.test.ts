// The egress floor in the lifecycle: a gate per workspace from fork to stop/teardown/rollback and after a
// restart, its policy persisted and applied live, its decisions in the events table at a bounded rate.
// In-memory sandbox driver; the gate is real, reached over its real socket. Only loopback is contacted.
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { connect as netConnect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { egressDecisionSchema, isGroveError } from '@grove/contracts';
import type { GroveEvent } from '@grove/contracts';
import { isLoopback, parseIp } from '@grove/egress';
import type { Connector } from '@grove/egress';
import { PROXY_ENV } from '@grove/runtime';
import type { Grove } from './index.ts';
import type { TestGroveOptions } from './test-support/test-grove.ts';
import { useGroveFixture } from './test-support/grove-fixture.ts';

let upstream: Server;
let upPort = 0;

/** Loopback only: anything else fails the test instead of leaving the machine. */
const connect: Connector = (t) => {
  const ip = parseIp(t.address);
  if (!ip || !isLoopback(ip)) throw new Error(`test connector refused non-loopback ${t.address}`);
  return netConnect({ host: t.address, port: t.port });
};

beforeAll(async () => {
  upstream = createServer((req, res) => res.end(`upstream-ok ${req.url}`));
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const a = upstream.address();
  upPort = typeof a === 'object' && a ? a.port : 0;
});
afterAll(async () => {
  await new Promise((r) => upstream.close(r));
});

const fx = useGroveFixture({
  tmpPrefix: 'grove-core-egress-',
  logLevel: process.env.GROVE_TEST_LOG,
  defaults: { maxRunning: 3, egress: { connect, resolver: async () => ['127.0.0.1'] } },
});
const { open, until } = fx;

/** withProject() and a running workspace demo~feat. */
async function withWorkspace(over: Partial<TestGroveOptions> = {}): Promise<Grove> {
  const g = await fx.withProject(over);
  await g.fork({ project: 'demo', name: 'feat' });
  return g;
}

const gateOf = (slug: string): string => join(fx.home, 'run', slug, 'egress.sock');

/** One request through a gate socket, as the sandbox's relay would send it. */
function through(socketPath: string, text: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const s = netConnect(socketPath);
    let out = '';
    let tunnelled = false;
    s.on('connect', () => s.write(text));
    s.on('data', (d: Buffer) => {
      out += d.toString();
      // Once a tunnel is up, one request through it to the test upstream.
      if (!tunnelled && out.startsWith('HTTP/1.1 200 Connection Established\r\n\r\n')) {
        tunnelled = true;
        s.write('GET /t HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      }
    });
    s.on('close', () => resolve({ status: Number(out.slice(9, 12)), text: out }));
    s.on('error', reject);
  });
}

async function egressEvents(g: Grove, slug: string): Promise<GroveEvent[]> {
  return (await g.events({ slug, limit: 1000 })).filter((e) => e.type.startsWith('egress.'));
}

describe('egress in the lifecycle', () => {
  it('starts the gate before the container, sets the proxy env, and stops it with the workspace', async () => {
    const g = await withWorkspace();
    expect(existsSync(gateOf('demo~feat'))).toBe(true);
    expect(fx.driver.containers.get('demo~feat')?.spec.env).toMatchObject(PROXY_ENV);
    expect(fx.driver.containers.get('demo~feat')?.spec.env.NO_PROXY).toBe('localhost,127.0.0.1');
    await g.stop('demo~feat');
    expect(existsSync(gateOf('demo~feat'))).toBe(false);
    await g.start('demo~feat');
    expect(existsSync(gateOf('demo~feat'))).toBe(true);
    await g.teardown('demo~feat');
    expect(existsSync(gateOf('demo~feat'))).toBe(false);
  });

  it('denies by default (scripted provider: nothing allowed) and writes the decision to the events table', async () => {
    const g = await withWorkspace();
    expect(await g.egress('demo~feat')).toMatchObject({ policy: { rules: [] }, source: 'default', decisions: [] });
    const r = await through(gateOf('demo~feat'), `CONNECT 127.0.0.1:${upPort} HTTP/1.1\r\n\r\n`);
    expect(r.status).toBe(403);
    const [e] = await until(async () => {
      const es = await egressEvents(g, 'demo~feat');
      return es.length ? es : undefined;
    });
    expect(e?.type).toBe('egress.denied');
    expect(egressDecisionSchema.omit({ slug: true }).safeParse(e?.data).success).toBe(true);
    expect(e?.data).toMatchObject({ host: '127.0.0.1', port: upPort, rule: 'blocked-address:loopback', decision: 'deny' });
    expect((await g.egress('demo~feat')).decisions.map((d) => d.id)).toEqual([e?.id]);
  });

  it("the default is the server's rules plus the project's; no provider opens a host of its own (the relay carries its API)", async () => {
    const g = await withWorkspace({ sandboxEnv: { GROVE_PROVIDER: 'claude' }, egress: { connect, defaultRules: [{ host: 'pkg.example', ports: [443] }] } });
    expect((await g.egress('demo~feat')).policy).toEqual({ rules: [{ host: 'pkg.example', ports: [443] }] });
    const h = await open();
    await h.setProjectConfig('demo', { agent: { provider: 'claude' } });
    expect((await h.egress('demo~feat')).policy).toEqual({ rules: [] });
    await h.setProjectConfig('demo', { agent: { provider: 'claude' }, egress: { rules: [{ host: 'registry.npmjs.org', ports: [443] }] } });
    expect((await h.egress('demo~feat')).policy).toEqual({ rules: [{ host: 'registry.npmjs.org', ports: [443] }] });
  });

  it('persists a new policy, applies it live, and keeps it across stop and start', async () => {
    const g = await withWorkspace();
    const policy = await g.setEgressPolicy('demo~feat', { rules: [{ host: '127.0.0.1', ports: [upPort] }] });
    expect(policy.rules).toEqual([{ host: '127.0.0.1', ports: [upPort] }]);
    const ok = await through(gateOf('demo~feat'), `CONNECT 127.0.0.1:${upPort} HTTP/1.1\r\n\r\n`);
    expect(ok.text).toContain('upstream-ok /t');
    const allowed = await until(async () => (await egressEvents(g, 'demo~feat')).find((e) => e.type === 'egress.allowed'));
    expect(allowed.data).toMatchObject({ address: '127.0.0.1', rule: `127.0.0.1:${upPort}`, status: 200 });
    expect(allowed.data.bytesIn).toBeGreaterThan(0);
    const changed = (await egressEvents(g, 'demo~feat')).find((e) => e.type === 'egress.policy');
    expect(changed?.data).toMatchObject({ before: [], after: [{ host: '127.0.0.1', ports: [upPort] }], applied: true });

    await g.stop('demo~feat');
    await g.setEgressPolicy('demo~feat', { rules: [{ host: 'example.com', ports: [443] }] });
    expect((await egressEvents(g, 'demo~feat')).at(-1)?.data).toMatchObject({ applied: false });
    await g.start('demo~feat');
    expect(await g.egress('demo~feat')).toMatchObject({ source: 'workspace', policy: { rules: [{ host: 'example.com', ports: [443] }] } });
    const denied = await through(gateOf('demo~feat'), `CONNECT 127.0.0.1:${upPort} HTTP/1.1\r\n\r\n`);
    expect(denied.status).toBe(403);
  });

  it('resets to the project default: stored policy dropped, applied live, recorded as egress.policy', async () => {
    const g = await withWorkspace({ egress: { connect, resolver: async () => ['127.0.0.1'], defaultRules: [{ host: 'pkg.example', ports: [443] }] } });
    await g.setEgressPolicy('demo~feat', { rules: [{ host: '127.0.0.1', ports: [upPort] }] });
    expect((await through(gateOf('demo~feat'), `CONNECT 127.0.0.1:${upPort} HTTP/1.1\r\n\r\n`)).text).toContain('upstream-ok');

    expect(await g.resetEgressPolicy('demo~feat')).toEqual({ rules: [{ host: 'pkg.example', ports: [443] }] });
    expect(await g.egress('demo~feat')).toMatchObject({ source: 'default', policy: { rules: [{ host: 'pkg.example', ports: [443] }] } });
    // The running gate follows at once.
    expect((await through(gateOf('demo~feat'), `CONNECT 127.0.0.1:${upPort} HTTP/1.1\r\n\r\n`)).status).toBe(403);
    const reset = (await egressEvents(g, 'demo~feat')).filter((e) => e.type === 'egress.policy').at(-1);
    expect(reset?.data).toMatchObject({ before: [{ host: '127.0.0.1', ports: [upPort] }], after: [{ host: 'pkg.example', ports: [443] }], applied: true, reset: true });
    // A default follows the project's configuration afterwards (it is not a copy frozen at reset).
    await g.setProjectConfig('demo', { egress: { rules: [{ host: 'registry.npmjs.org', ports: [443] }] } });
    expect((await g.egress('demo~feat')).policy.rules).toContainEqual({ host: 'registry.npmjs.org', ports: [443] });
    const missing = await g.resetEgressPolicy('demo~nope').catch((e: unknown) => e);
    expect(isGroveError(missing) && missing.code).toBe('workspace_not_found');
  });

  // An invalid policy never reaches core: the server parses it (egress-api.test.ts names each refused rule).
  it('refuses unknown workspaces', async () => {
    const g = await withWorkspace();
    const missing = await g.egress('demo~nope').catch((e: unknown) => e);
    expect(isGroveError(missing) && missing.code).toBe('workspace_not_found');
  });

  it('restarts the gates of running workspaces on reconcile (a new server process)', async () => {
    const g = await withWorkspace();
    await g.setEgressPolicy('demo~feat', { rules: [{ host: '127.0.0.1', ports: [upPort] }] });
    await g.close();
    expect(existsSync(gateOf('demo~feat'))).toBe(false);
    const again = await open();
    await again.reconcile();
    expect(existsSync(gateOf('demo~feat'))).toBe(true);
    const ok = await through(gateOf('demo~feat'), `CONNECT 127.0.0.1:${upPort} HTTP/1.1\r\n\r\n`);
    expect(ok.text).toContain('upstream-ok');
  });

  it('rolls the gate back with a failed fork', async () => {
    const g = await open({ healthTimeoutMs: 300 });
    await g.addProject({ name: 'demo', source: fx.source, createDefault: false });
    fx.driver.behave.listen = false;
    await expect(g.fork({ project: 'demo', name: 'dead' })).rejects.toMatchObject({ code: 'spawn_failed' });
    expect(existsSync(join(fx.home, 'run', 'demo~dead'))).toBe(false);
  });
});
