// The egress floor and the isolation promises, from inside real sandboxes of the real server (issue 5).
// Traffic goes to loopback only: the corpus cases run here are the ones whose target is a loopback or
// unspecified address (a gate bug could only reach the host itself); the full corpus, names and private
// ranges included, runs in packages/egress/src/gate.docker.test.ts behind a loopback-only connector.
// The only connect() toward another address (192.0.2.1, TEST-NET-1) happens after the test has shown
// the sandbox has no route at all.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { egressResponseSchema } from '@grove/contracts';
import type { EgressResponse, EventsResponse, GroveEvent, ListWorkspacesResponse, ThreadLine, Workspace } from '@grove/contracts';
import { classify, parseHost, splitAuthority, unmap } from '@grove/egress';
import { loadCorpus } from '../packages/egress/src/corpus.ts';
import type { CorpusCase } from '../packages/egress/src/corpus.ts';
import { PROBE_SOURCE, PROMISED_ENV, parseResponse, probeArg, probeCases } from '../packages/egress/src/probe.ts';
import type { ProbeCase, ProbeResult } from '../packages/egress/src/probe.ts';
import { listCommand } from '../packages/sandbox/src/test-support.ts';
import { TEST_RUNTIME, TOKEN, agentExec, cleanup, containerOf, dockerExec, makeHome, startServer, waitFor, waitRunning, type RunningServer } from './harness.ts';
import { findSecretsInSandbox } from './support/secrets.ts';

const home = makeHome('egress');
let s: RunningServer;
let upstream: http.Server;
let upPort = 0;
let upstreamHits = 0;
/** A second upstream on another port: a policy change can then drop one tunnel and keep the other. */
let upstream2: http.Server;
let upPort2 = 0;
const A = 'demo~ea';
const B = 'demo~eb';
const RELAY = { host: '127.0.0.1', port: 3128 };
/** The agent's user inside every sandbox (the container's own user is the backend's). */
// Sentinels planted in the server's environment, where the real ones live: "no key in the sandbox" is then
// checked by value, not only by variable name.
const PROVIDER_KEY = `sk-ant-SENTINEL-${randomBytes(12).toString('hex')}`;
const FORGE_TOKEN = `grove-forge-SENTINEL-${randomBytes(12).toString('hex')}`;
// The warm pool on, as users run it: A is a claimed warm sandbox (checked in beforeAll), so every promise below is
// proven on the sandbox a fork gets by default; B forks right after, while the pool refills, so it usually starts
// cold (not asserted: what B is checked for holds either way).
const SERVER_ENV = { ANTHROPIC_API_KEY: PROVIDER_KEY, GROVE_FORGE_TOKEN: FORGE_TOKEN, GROVE_WARM_POOL: '1' };

function container(slug: string): string {
  const id = containerOf(s.instance, slug);
  if (!id) throw new Error(`no container for ${slug}`);
  return id;
}

/**
 * The one identity variable the engine gave slug's container: GROVE_SLUG for a cold start, GROVE_POOL=<warm id> for a
 * claimed warm sandbox (it learned its slug over the claim socket; environments cannot change in a running container).
 */
function identity(slug: string): string {
  const env = JSON.parse(execFileSync('docker', ['inspect', '--format', '{{json .Config.Env}}', container(slug)], { encoding: 'utf8' })) as string[];
  const ids = env.filter((e) => e.startsWith('GROVE_SLUG=') || e.startsWith('GROVE_POOL='));
  expect(ids).toHaveLength(1);
  return ids[0] ?? '';
}

function sh(slug: string, script: string): { code: number; out: string } {
  return dockerExec(container(slug), ['sh', '-c', script]);
}

function node(slug: string, source: string, ...args: string[]): { code: number; out: string } {
  return dockerExec(container(slug), ['node', '-e', source, ...args]);
}

const run = promisify(execFile);

/**
 * Runs inside a sandbox: holds a tunnel to `cut` and one to `kept` through the relay, says "ready", waits for
 * a line on stdin (the host changes the policy meanwhile), then reports whether `cut` was closed and what a
 * request through `kept` got back.
 */
const HOLD_TWO_SOURCE = String.raw`
const net = require('net');
const { cut, kept } = JSON.parse(process.argv[1]);
function tunnel(target) {
  return new Promise((resolve, reject) => {
    const s = net.connect(3128, '127.0.0.1');
    let b = '';
    s.on('connect', () => s.write('CONNECT ' + target + ' HTTP/1.1\r\nHost: ' + target + '\r\n\r\n'));
    s.on('error', reject);
    s.on('data', function head(d) {
      b += d;
      if (!b.includes('\r\n\r\n')) return;
      s.off('data', head);
      if (!/^HTTP\/1\.1 200/.test(b)) reject(new Error(target + ': ' + b));
      else resolve(s);
    });
  });
}
(async () => {
  const a = await tunnel(cut);
  const b = await tunnel(kept);
  let cutClosed = false;
  let keptClosed = false;
  let text = '';
  a.on('close', () => (cutClosed = true));
  a.on('error', () => undefined);
  b.on('error', () => undefined);
  b.on('data', (d) => (text += d));
  const report = (keptClosedEarly) => { process.stdout.write(JSON.stringify({ cutClosed, keptClosedEarly, kept: text })); process.exit(0); };
  b.on('close', () => { keptClosed = true; });
  process.stdout.write('ready\n');
  await new Promise((r) => process.stdin.once('data', r));
  for (let i = 0; i < 50 && !cutClosed; i++) await new Promise((r) => setTimeout(r, 100));
  if (keptClosed) report(true);
  b.on('close', () => report(false));
  b.write('GET /kept-after-the-change HTTP/1.1\r\nHost: kept\r\nConnection: close\r\n\r\n');
})().catch((e) => { process.stdout.write(JSON.stringify({ error: String(e) })); process.exit(3); });
`;

/** Asynchronous: the test upstream lives in this process and must keep answering while the probe runs. */
async function probe(slug: string, cases: ProbeCase[]): Promise<ProbeResult[]> {
  const r = await run('docker', agentExec(container(slug), ['node', '-e', PROBE_SOURCE, probeArg(RELAY, cases)]), { encoding: 'utf8', maxBuffer: 16 << 20 });
  return JSON.parse(r.stdout) as ProbeResult[];
}

async function egressOf(slug: string, limit = 200): Promise<EgressResponse> {
  const r = await s.api<EgressResponse>('GET', `/api/workspaces/${slug}/egress?limit=${limit}`);
  expect(r.status).toBe(200);
  return egressResponseSchema.parse(r.body);
}

/** The host a case targets (CONNECT authority, absolute-URL authority, or the Host header of a raw request). */
function targetHost(c: CorpusCase): string | null {
  const r = c.request;
  const authority =
    r.kind === 'connect' ? r.target : r.kind === 'http' ? (r.url.replace(/^[a-z]+:\/\//i, '').split(/[/?#]/, 1)[0] ?? '') : (/\r\nHost: ([^\r]+)/i.exec(r.text)?.[1] ?? '');
  const a = splitAuthority(authority, 80);
  return 'error' in a ? null : a.host;
}

/** Cases whose target is an address on this host: even a gate that wrongly allowed them could reach nothing else. */
function hostOnly(c: CorpusCase): boolean {
  const h = targetHost(c);
  if (h === null) return false;
  const p = parseHost(h);
  if (p.kind !== 'ip') return false;
  const cls = classify(unmap(p.ip));
  return cls === 'loopback' || cls === 'unspecified';
}

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    upstreamHits++;
    res.end(`upstream-ok ${req.method} ${req.url}`);
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const addr = upstream.address();
  upPort = typeof addr === 'object' && addr ? addr.port : 0;
  upstream2 = http.createServer((req, res) => res.end(`upstream2-ok ${req.method} ${req.url}`));
  await new Promise<void>((r) => upstream2.listen(0, '127.0.0.1', r));
  const addr2 = upstream2.address();
  upPort2 = typeof addr2 === 'object' && addr2 ? addr2.port : 0;
  s = await startServer({ home, env: SERVER_ENV });
  await waitRunning(s, 'demo');
  await waitFor('a ready warm sandbox', async () => ((await s.api<ListWorkspacesResponse>('GET', '/api/workspaces')).body.capacity.warm ?? 0) >= 1);
  for (const name of ['ea', 'eb']) {
    const r = await s.api<{ workspace: Workspace }>('POST', '/api/workspaces', { project: 'demo', name });
    expect(r.status).toBe(201);
  }
  const started = (await s.api<EventsResponse>('GET', `/api/events?slug=${encodeURIComponent(A)}`)).body.events.find((e) => e.type === 'sandbox.started');
  expect(started?.data.warm, 'A claimed the warm sandbox').toBe(true);
  expect(identity(A)).toMatch(/^GROVE_POOL=/);
});

afterAll(async () => {
  await s?.stop();
  cleanup(home);
  await new Promise((r) => upstream?.close(r));
  await new Promise((r) => upstream2?.close(r));
});

describe('egress: no way out but the gate', () => {
  it('has only loopback and no route at all; raw TCP and UDP toward another address fail without one', () => {
    expect(sh(A, listCommand('/sys/class/net', TEST_RUNTIME)).out.trim().split(/\s+/)).toEqual(['lo']);
    expect(sh(A, 'cat /proc/net/route').out.trim().split('\n')).toHaveLength(1); // the header: no IPv4 route
    const v6 = sh(A, 'cat /proc/net/ipv6_route 2>/dev/null').out.trim();
    for (const line of v6 ? v6.split('\n') : []) expect(line.trim().split(/\s+/).at(-1)).toBe('lo');
    // Proven above that nothing can leave; so these fail in the kernel, before any packet exists (gVisor's network
    // stack names the missing route EHOSTUNREACH).
    const noRoute = TEST_RUNTIME === 'runc' ? 'ENETUNREACH' : 'EHOSTUNREACH';
    const tcp = node(A, "const s=require('net').connect(80,'192.0.2.1');s.on('connect',()=>{console.log('connected');process.exit(0)});s.on('error',e=>{console.log(e.code);process.exit(3)})");
    expect(tcp).toMatchObject({ code: 3 });
    expect(tcp.out.trim()).toBe(noRoute);
    const udp = node(A, "const d=require('dgram').createSocket('udp4');d.send(Buffer.from('x'),53,'192.0.2.1',e=>{console.log(e?e.code:'sent');process.exit(e?3:0)})");
    expect(udp).toMatchObject({ code: 3 });
    expect(udp.out.trim()).toBe(noRoute);
    // Name resolution has nowhere to go either.
    const dns = node(A, "require('dns').lookup('example.com',e=>{console.log(e?e.code:'resolved');process.exit(e?3:0)})");
    expect(dns.code).toBe(3);
  });

  it('cannot send ICMP either: no raw sockets (no CAP_NET_RAW), and the unprivileged ping socket has no route', async () => {
    // Node has no ICMP: a small static C probe, built here and piped into the sandbox's /tmp. Both steps
    // run asynchronously: a test blocked for seconds would leave the harness's pooled keep-alive socket
    // to the server stale (closed by the server meanwhile) for the next request.
    const dir = fs.mkdtempSync(path.join(home, 'icmp-'));
    const bin = path.join(dir, 'icmp-probe');
    await run('gcc', ['-static', '-O2', '-o', bin, path.join(import.meta.dirname, 'fixtures', 'icmp-probe.c')]);
    const out = await new Promise<string>((resolve, reject) => {
      const c = spawn('docker', agentExec(container(A), ['sh', '-c', 'cat > /tmp/icmp-probe && chmod 755 /tmp/icmp-probe && /tmp/icmp-probe 192.0.2.1; rm -f /tmp/icmp-probe'], { interactive: true }), {
        stdio: ['pipe', 'pipe', 'inherit'],
      });
      let text = '';
      c.stdout.on('data', (d: Buffer) => (text += d.toString('utf8')));
      c.on('error', reject);
      c.on('close', (code) => (code === 0 ? resolve(text) : reject(new Error(`docker exec of the ICMP probe exited with ${code}`))));
      c.stdin.end(fs.readFileSync(bin));
    });
    const r = JSON.parse(out.trim()) as { raw: string; ping: string };
    expect(r.raw).toBe('EPERM');
    // EACCES when the sandbox's group is outside net.ipv4.ping_group_range; ENETUNREACH when inside it (gVisor's
    // network stack says EHOSTUNREACH for the same missing route).
    expect(['EACCES', 'ENETUNREACH', ...(TEST_RUNTIME === 'runsc' ? ['EHOSTUNREACH'] : [])]).toContain(r.ping);
  });

  it('points every process at the relay, and the relay at this workspace\'s gate', async () => {
    // The environment core gave the container (the engine's record), and what every process in it
    // really carries, read from the host (which sees every process, whoever it runs as).
    const proxyVars = (env: string[]): string[] => env.filter((e) => /^(https?|no)_proxy=/i.test(e)).sort();
    const configEnv = JSON.parse(execFileSync('docker', ['inspect', '--format', '{{json .Config.Env}}', container(A)], { encoding: 'utf8' })) as string[];
    expect(proxyVars(configEnv)).toEqual(PROMISED_ENV);
    const pids = execFileSync('docker', ['top', container(A), '-eo', 'pid'], { encoding: 'utf8' }).trim().split('\n').slice(1).map((l) => l.trim());
    expect(pids.length).toBeGreaterThan(0);
    for (const pid of pids) {
      // gVisor's processes live in its own kernel, which the host cannot look into: there `docker top` gives the
      // sandbox's pids, read by root inside.
      const raw = TEST_RUNTIME === 'runc' ? fs.readFileSync(`/proc/${pid}/environ`, 'latin1') : dockerExec(container(A), ['cat', `/proc/${pid}/environ`], { user: '0:0' }).out;
      const env = raw.split('\0');
      expect(env, `pid ${pid}`).toContain(identity(A));
      expect(proxyVars(env), `pid ${pid}`).toEqual(PROMISED_ENV);
    }
    // Something listens on 127.0.0.1:3128 in the sandbox (a LISTEN row of its own /proc/net/tcp) ...
    const tcp = sh(A, 'cat /proc/net/tcp');
    expect(tcp.code, tcp.out).toBe(0);
    const listening = tcp.out.split('\n').slice(1).map((l) => l.trim().split(/\s+/)).filter((f) => f[3] === '0A').map((f) => f[1]);
    expect(listening).toContain('0100007F:0C38');
    // ... and what answers there is this workspace's gate: a name only this test uses is refused by the
    // gate's rule, and the refusal is in A's audit trail (and in no other workspace's).
    const marker = `relay-check-${randomBytes(4).toString('hex')}.test`;
    const [r] = await probe(A, [{ id: 'relay', text: `CONNECT ${marker}:443 HTTP/1.1\r\nHost: ${marker}:443\r\n\r\n` }]);
    const res = parseResponse(r?.text ?? '');
    expect(res.status, r?.text).toBe(403);
    expect(JSON.parse(res.body)).toMatchObject({ code: 'egress_denied', rule: 'not-in-policy', host: marker });
    const audited = await waitFor('the relay check in A\'s audit trail', async () => (await egressOf(A)).decisions.find((d) => d.data.host === marker));
    expect(audited).toMatchObject({ type: 'egress.denied', slug: A, data: { rule: 'not-in-policy', decision: 'deny' } });
    expect((await egressOf(B)).decisions.some((d) => d.data.host === marker)).toBe(false);
    expect(fs.statSync(path.join(home, 'run', A, 'egress.sock')).isSocket()).toBe(true);
    // The gate's socket is the backend's to use (root in the sandbox); the agent's processes reach it only
    // through the relay on 127.0.0.1:3128, never directly.
    expect(dockerExec(container(A), ['test', '-S', '/run/grove/egress.sock'], { user: '0:0' }).code).toBe(0);
    const direct = sh(A, `test -e /run/grove/egress.sock; echo "exists=$?"; ${listCommand('/run/grove', TEST_RUNTIME)}`);
    expect(direct.out).toContain('exists=1');
    expect(direct.out).toMatch(/permission denied/i);
  });
});

describe('egress: the policy decides, and every decision is audited', () => {
  it('denies everything by default (scripted provider) and shows the denial in GET /egress', async () => {
    const before = await egressOf(A);
    expect(before).toMatchObject({ policy: { rules: [] }, source: 'default' });
    const [r] = await probe(A, [{ id: 'default', text: `CONNECT 127.0.0.1:${upPort} HTTP/1.1\r\n\r\n` }]);
    const res = parseResponse(r?.text ?? '');
    expect(res.status).toBe(403);
    expect(JSON.parse(res.body)).toMatchObject({ code: 'egress_denied', rule: 'blocked-address:loopback' });
    const after = await waitFor('the denial in the audit trail', async () => {
      const e = await egressOf(A);
      return e.decisions.find((d) => d.type === 'egress.denied' && d.data.port === upPort);
    });
    expect(after.data).toMatchObject({ host: '127.0.0.1', address: '127.0.0.1', decision: 'deny', rule: 'blocked-address:loopback' });
  });

  it('PUT validates the policy and applies it live; the loopback corpus is denied before connecting, the allowed cases reach the host', async () => {
    const corpus = loadCorpus(upPort);
    const bad = await s.api<{ code: string; message: string }>('PUT', `/api/workspaces/${A}/egress`, { rules: [{ host: '*.com', ports: [443] }] });
    expect(bad.status).toBe(422);
    const put = await s.api<{ policy: unknown }>('PUT', `/api/workspaces/${A}/egress`, corpus.policy);
    expect(put.status).toBe(200);
    expect(put.body.policy).toEqual(corpus.policy);

    const cases = corpus.cases.filter(hostOnly);
    const denied = cases.filter((c) => c.expect === 'deny');
    const allowed = cases.filter((c) => c.expect === 'allow');
    expect(denied.length).toBeGreaterThanOrEqual(25);
    expect(allowed.length).toBeGreaterThanOrEqual(3);
    const hitsBefore = upstreamHits;
    const lastId = (await egressOf(A)).decisions[0]?.id ?? 0;
    const results = await probe(A, probeCases(cases));
    cases.forEach((c, i) => {
      const res = parseResponse(results[i]?.text ?? '');
      const where = `${c.id}: ${results[i]?.text.slice(0, 200)}`;
      if (c.expect === 'deny') {
        expect(res.status, where).toBe(c.status ?? 403);
        expect((JSON.parse(res.body) as { rule: string }).rule, where).toBe(c.rule);
      } else {
        expect(res.body, where).toMatch(/^upstream-ok /);
      }
    });
    expect(upstreamHits - hitsBefore).toBe(allowed.length);
    // Every one of them is in the audit trail (events table), with its rule.
    const fresh = await waitFor('all decisions audited', async () => {
      const e = (await egressOf(A, 500)).decisions.filter((d) => d.id > lastId);
      return e.length >= cases.length ? e : undefined;
    });
    const byRule = (type: string, rule: string): GroveEvent[] => fresh.filter((d) => d.type === type && d.data.rule === rule);
    for (const c of denied) expect(byRule('egress.denied', c.rule).length, c.id).toBeGreaterThan(0);
    expect(fresh.filter((d) => d.type === 'egress.denied')).toHaveLength(denied.length);
    const allowedEvents = fresh.filter((d) => d.type === 'egress.allowed');
    expect(allowedEvents).toHaveLength(allowed.length);
    for (const e of allowedEvents) {
      expect(e.data).toMatchObject({ address: '127.0.0.1', port: upPort, status: 200 });
      expect(e.data.bytesIn).toBeGreaterThan(0);
      expect(e.data.bytesOut).toBeGreaterThan(0);
    }
    const changed = await s.api<{ events: GroveEvent[] }>('GET', `/api/events?slug=${encodeURIComponent(A)}&limit=1000`);
    expect(changed.body.events.some((e) => e.type === 'egress.policy')).toBe(true);
  });

  it('a PUT cuts the open tunnels the new policy no longer allows, and only those', async () => {
    // A process in A holds a tunnel to each upstream; the new policy keeps only the second port.
    const before = await s.api('PUT', `/api/workspaces/${A}/egress`, { rules: [{ host: '127.0.0.1', ports: [upPort, upPort2] }] });
    expect(before.status).toBe(200);
    const child = spawn('docker', agentExec(container(A), ['node', '-e', HOLD_TWO_SOURCE, JSON.stringify({ cut: `127.0.0.1:${upPort}`, kept: `127.0.0.1:${upPort2}` })], { interactive: true }), { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('latin1')));
    const exited = new Promise<void>((r) => child.on('close', () => r()));
    try {
      await waitFor('both tunnels up', async () => out.includes('ready\n'), 30_000);
      const put = await s.api('PUT', `/api/workspaces/${A}/egress`, { rules: [{ host: '127.0.0.1', ports: [upPort2] }] });
      expect(put.status).toBe(200);
      child.stdin.end('go\n');
      await exited;
    } finally {
      child.kill();
    }
    const result = JSON.parse(out.slice(out.indexOf('ready\n') + 'ready\n'.length)) as { cutClosed: boolean; keptClosedEarly: boolean; kept: string };
    expect(result.cutClosed).toBe(true);
    expect(result.keptClosedEarly).toBe(false);
    expect(parseResponse(result.kept).body).toBe('upstream2-ok GET /kept-after-the-change');
    // The corpus policy back, for the tests that follow.
    expect((await s.api('PUT', `/api/workspaces/${A}/egress`, loadCorpus(upPort).policy)).status).toBe(200);
  });

  it('a flood of denials from a sandbox is written as a budget of rows plus summaries that count every one', async () => {
    // B is on the default policy: every CONNECT is denied. A port nothing else in this file uses keys the rows.
    const port = 19;
    const n = 200;
    const cases: ProbeCase[] = Array.from({ length: n }, (_, i) => ({ id: `flood-${i}`, text: `CONNECT 127.0.0.1:${port} HTTP/1.1\r\n\r\n` }));
    const results = await probe(B, cases);
    expect(results.filter((r) => parseResponse(r.text).status === 403)).toHaveLength(n);
    const counted = (events: GroveEvent[]): { rows: number; decisions: number; summaries: number } => {
      const mine = events.filter((e) => e.type === 'egress.denied' && e.data.port === port);
      const summaries = mine.filter((e) => typeof e.data.count === 'number');
      return { rows: mine.length, summaries: summaries.length, decisions: mine.reduce((sum, e) => sum + (typeof e.data.count === 'number' ? e.data.count : 1), 0) };
    };
    // The summaries are written when the 10 s window ends.
    const seen = await waitFor('every denial counted', async () => {
      const r = await s.api<{ events: GroveEvent[] }>('GET', `/api/events?slug=${encodeURIComponent(B)}&type=egress.denied&limit=1000`);
      const c = counted(r.body.events);
      return c.decisions >= n ? c : undefined;
    }, 40_000);
    expect(seen.decisions).toBe(n);
    expect(seen.summaries).toBeGreaterThan(0);
    // At most 50 rows one by one per window (the burst may straddle two), plus a summary per window.
    expect(seen.rows - seen.summaries).toBeLessThanOrEqual(100);
    expect(seen.rows).toBeLessThan(n / 1.5);
  });

  it('keeps the policy and restarts the gate when the server restarts', async () => {
    await s.stop();
    s = await startServer({ home, env: SERVER_ENV });
    await waitRunning(s, A);
    expect((await egressOf(A)).source).toBe('workspace');
    const [r] = await probe(A, probeCases(loadCorpus(upPort).cases.filter((c) => c.id === 'allow-ip-rule')));
    expect(parseResponse(r?.text ?? '').body).toMatch(/^upstream-ok /);
  });
});

describe('isolation between workspaces', () => {
  it("one workspace's policy is not another's: B, on the default policy, is still denied", async () => {
    const [r] = await probe(B, [{ id: 'b', text: `CONNECT 127.0.0.1:${upPort} HTTP/1.1\r\n\r\n` }]);
    expect(parseResponse(r?.text ?? '').status).toBe(403);
  });

  it("A sees neither B's sockets, files nor processes, nor the Docker socket", () => {
    // A marker in B's run dir and worktree on the host: A's mounts are its own directories.
    fs.writeFileSync(path.join(home, 'run', B, 'marker-b'), 'b');
    fs.writeFileSync(path.join(home, 'worktrees', 'demo', 'eb', 'marker-b.txt'), 'b');
    expect(sh(A, 'ls -a /run/grove').out).not.toContain('marker-b');
    expect(sh(A, 'ls -a /workspace').out).not.toContain('marker-b');
    // (The bare repository is mounted read-only at its host path, so <home>/repos/demo exists inside; nothing else of home does.)
    const elsewhere = ['run', 'threads', 'state', 'worktrees', 'archive', 'locks', 'token', 'grove.db'].map((n) => path.join(home, n));
    for (const p of [path.join(home, 'run', B), path.join(home, 'worktrees', 'demo', 'eb'), path.join(home, 'threads', B), ...elsewhere]) {
      expect(sh(A, `test -e '${p}'`).code, p).not.toBe(0);
    }
    expect(sh(A, 'test -e /var/run/docker.sock || test -e /run/docker.sock').code).not.toBe(0);
    // Every process A can see is one of its own.
    const slugs = sh(A, "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f 2>/dev/null | grep -E '^GROVE_(SLUG|POOL)='; done | sort -u").out.trim();
    expect(slugs).toBe(identity(A));
  });

  it("the server's port on the host is not reachable: 127.0.0.1 in the sandbox is the sandbox's own", () => {
    // Neither the dashboard's listener nor the preview listener.
    for (const port of [new URL(s.base).port, new URL(s.previewBase).port]) {
      const r = node(A, `const s=require('net').connect(${port},'127.0.0.1');s.on('connect',()=>{console.log('connected');process.exit(0)});s.on('error',e=>{console.log(e.code);process.exit(3)})`);
      expect(r.out.trim(), port).toBe('ECONNREFUSED');
    }
    // Nor is the test upstream, except through the gate.
    const up = node(A, `const s=require('net').connect(${upPort},'127.0.0.1');s.on('connect',()=>{console.log('connected');process.exit(0)});s.on('error',e=>{console.log(e.code);process.exit(3)})`);
    expect(up.out.trim()).toBe('ECONNREFUSED');
  });
});

describe('the host reads nothing the sandbox plants', () => {
  it('the last-message and recent-messages reads take a regular thread file, but neither a link to a host file nor a FIFO planted in its place', async () => {
    // What the sandbox can write is what the host reads here: thread.jsonl, in a dir mounted from the host.
    const line = (text: string): string => JSON.stringify({ seq: 0, turn: 'turn-1', at: new Date().toISOString(), kind: 'user', text });
    const tag = randomBytes(4).toString('hex');
    // A host file outside every mount, which a link planted in the thread dir would point at.
    const target = path.join(home, `planted-${tag}.jsonl`);
    fs.writeFileSync(target, `${line(`host-file-${tag}`)}\n`);
    const read = async (what: 'last-message' | 'recent-messages'): Promise<{ status: number; text: string }> => {
      const get = () =>
        fetch(`${s.base}/api/workspaces/${encodeURIComponent(B)}/${what}`, {
          headers: { authorization: `Bearer ${TOKEN}` },
          signal: AbortSignal.timeout(15_000),
        });
      // Once more on a fresh connection when the pooled one was closed: the synchronous execs between the calls
      // (slower on gVisor) can outlast the server's keep-alive. A GET, so asking twice changes nothing.
      const r = await get().catch((e: unknown) => {
        if ((e as { cause?: { code?: string } }).cause?.code === 'UND_ERR_SOCKET') return get();
        throw e;
      });
      return { status: r.status, text: await r.text() };
    };
    // Both reads as one answer, each held to the same checks: how many of the two answered 200, and both bodies.
    const lastMessage = async (): Promise<{ oks: number; text: string }> => {
      const both = [await read('last-message'), await read('recent-messages')];
      return { oks: both.filter((r) => r.status === 200).length, text: both.map((r) => r.text).join('\n') };
    };
    const dir = '/var/lib/grove/thread';
    // The agent cannot write the thread dir at all (it is the backend's) ...
    const agent = sh(B, `touch ${dir}/planted-${tag} 2>&1; echo "code=$?"`);
    expect(agent.out).toContain('code=1');
    expect(agent.out).toMatch(/permission denied/i);
    // ... so the plants below come from the backend's user (root in the container): a backend the agent
    // exploited is still not trusted by the host.
    const plant = (script: string): void => {
      const r = dockerExec(container(B), ['sh', '-c', `cd ${dir} && ${script}`], { user: '0:0' });
      expect(r.code, r.out).toBe(0);
    };
    plant('if [ -e thread.jsonl ]; then mv thread.jsonl thread.jsonl.test-bak; fi');
    try {
      // The control: a regular file the sandbox writes is read and quoted.
      plant(`printf '%s\\n' '${line(`regular-${tag}`)}' > thread.jsonl`);
      const regular = await lastMessage();
      expect(regular.oks, regular.text).toBe(2);
      expect(regular.text.split(`regular-${tag}`).length - 1, regular.text).toBe(2);
      // A link to a host file: refused, the host file's content is never quoted.
      plant(`rm thread.jsonl && ln -s '${target}' thread.jsonl`);
      const linked = await lastMessage();
      expect(linked.text).not.toContain(`host-file-${tag}`);
      expect(linked.oks).toBe(0);
      // A FIFO: answered at once (nothing ever writes to it), not a request that hangs.
      plant('rm thread.jsonl && mkfifo thread.jsonl');
      const fifo = await lastMessage();
      if (TEST_RUNTIME === 'runc') {
        expect(fifo.oks).toBe(0);
      } else {
        // gVisor keeps a FIFO made in a bind mount inside its own kernel: no FIFO reaches the host at all, so the
        // host finds no thread file there (no last message) and has nothing to block on.
        expect(fs.statSync(path.join(home, 'threads', B)).isDirectory()).toBe(true);
        expect(fs.lstatSync(path.join(home, 'threads', B, 'thread.jsonl'), { throwIfNoEntry: false })?.isFIFO() ?? false).toBe(false);
      }
      expect(fifo.text).not.toContain(tag);
    } finally {
      plant('rm -f thread.jsonl && if [ -e thread.jsonl.test-bak ]; then mv thread.jsonl.test-bak thread.jsonl; fi');
    }
  });
});

describe('no secret inside', () => {
  it('no process environment holds a key, token or secret, and the Grove token is nowhere in the sandbox', { timeout: 120_000 }, async () => {
    // The sentinels are where the real secrets live: in the server's environment.
    const serverEnv = fs.readFileSync(`/proc/${s.child.pid}/environ`, 'latin1').split('\0');
    expect(serverEnv).toEqual(expect.arrayContaining([`ANTHROPIC_API_KEY=${PROVIDER_KEY}`, `GROVE_FORGE_TOKEN=${FORGE_TOKEN}`, `GROVE_TOKEN=${TOKEN}`]));
    // No variable that even looks like a secret, in the engine's record or in any process.
    const secretName = (n: string): boolean => /(_KEY|API_?KEY|TOKEN|SECRET|PASSWORD|CREDENTIALS?)$/i.test(n);
    const names = sh(A, "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | cut -d= -f1 | sort -u").out.trim().split('\n');
    expect(names).toContain(identity(A).split('=')[0]); // the scan did read the environments
    expect(names.filter(secretName)).toEqual([]);
    const env = JSON.parse(execFileSync('docker', ['inspect', '--format', '{{json .Config.Env}}', container(A)], { encoding: 'utf8' })) as string[];
    expect(env.map((e) => e.split('=')[0] ?? '').filter(secretName)).toEqual([]);
    // And no value: environments, command lines, the process list and every file (each scan with a positive control).
    expect(await findSecretsInSandbox(container(A), { ANTHROPIC_API_KEY: PROVIDER_KEY, GROVE_FORGE_TOKEN: FORGE_TOKEN, GROVE_TOKEN: TOKEN })).toEqual([]);
  });
});

describe('resource abuse is contained', () => {
  async function bStillServes(): Promise<void> {
    const health = await fetch(`${s.base}/api/health`);
    expect(health.status).toBe(200);
    const sent = await s.api<{ turn: string }>('POST', `/w/${B}/messages`, { text: `still here ${Date.now()}` });
    expect(sent.status).toBe(202);
    await waitFor('B answers', async () => {
      const t = await s.api<{ lines: ThreadLine[] }>('GET', `/w/${B}/thread`);
      return t.body.lines.some((l) => l.kind === 'turn_end' && l.turn === sent.body.turn);
    }, 30_000);
  }

  // Under gVisor the host's pids limit counts gVisor's own threads, and a bomb that reaches it takes A's whole sandbox
  // down instead of meeting EAGAIN (docs/security.md, "gVisor"): what this test measures does not exist there.
  it.skipIf(TEST_RUNTIME === 'runsc')('a fork bomb stops at the pids limit while the server and B keep serving', async () => {
    // Spawns until the kernel refuses (EAGAIN), holds the processes while the host checks B, then kills them.
    const bomb = `
      const { spawn } = require('child_process');
      const kids = []; let err = null;
      (async () => {
        for (let i = 0; i < 1000 && !err; i++) {
          err = await new Promise((r) => { const c = spawn('sleep', ['120']); c.once('spawn', () => { kids.push(c); r(null); }); c.once('error', (e) => r(e.code || e.message)); });
        }
        console.log(JSON.stringify({ spawned: kids.length, err }));
        setTimeout(() => { for (const c of kids) c.kill('SIGKILL'); process.exit(0); }, Number(process.argv[1]));
      })();`;
    // Asynchronous: the bomb holds the limit for a few seconds while the host checks B.
    const run = new Promise<{ spawned: number; err: string }>((resolve, reject) => {
      execFile('docker', agentExec(container(A), ['node', '-e', bomb, '8000']), { encoding: 'utf8' }, (e, out) => {
        if (e && !out) reject(e);
        else resolve(JSON.parse(out.trim().split('\n')[0] ?? '{}') as { spawned: number; err: string });
      });
    });
    await new Promise((r) => setTimeout(r, 3_000)); // the bomb is at the limit by now
    await bStillServes();
    const result = await run;
    expect(result.err).toBe('EAGAIN');
    expect(result.spawned).toBeGreaterThan(50);
    expect(result.spawned).toBeLessThan(256); // DEFAULT_LIMITS.pids, shared with the backend's own tasks
    // A recovers once the processes are gone.
    await waitFor('A healthy again', async () => (await s.api('GET', `/w/${A}/health`)).status === 200);
  });

  it('a memory hog is killed by the memory limit while the server and B keep serving', async () => {
    const hogCmd = ['node', '-e', 'const a=[];for(;;)a.push(Buffer.alloc(16<<20,1))'];
    if (TEST_RUNTIME === 'runc') {
      const hog = dockerExec(container(A), hogCmd);
      expect(hog.code).toBe(137); // SIGKILL from the cgroup's OOM killer
      await bStillServes();
      expect((await s.api('GET', `/w/${A}/health`)).status).toBe(200); // the hog died, not A's backend
    } else {
      // Under gVisor the limit bounds the whole sandbox, its kernel included: the host's OOM killer ends all of A (an
      // attached exec would hang on it, so the hog runs detached), A is reported stopped, B and the server carry on.
      execFileSync('docker', agentExec(container(A), hogCmd, { detach: true }));
      const w = await waitFor('A reported stopped', async () => {
        const r = await s.api<{ workspace: { state: string; failureReason: string | null } }>('GET', `/api/workspaces/${encodeURIComponent(A)}`);
        return r.body.workspace.state === 'stopped' ? r.body.workspace : null;
      });
      expect(w.failureReason).toBe('the sandbox stopped unexpectedly: it exited with code 137 (out of memory)');
      await bStillServes();
      expect((await s.api('POST', `/api/workspaces/${encodeURIComponent(A)}/start`)).status).toBe(200);
      await waitFor('A reopened', async () => (await s.api('GET', `/w/${A}/health`)).status === 200);
    }
    // Reported: the engine's oom event lands in A's audit trail with the limit it hit.
    const oom = await waitFor('the oom event', async () => {
      const r = await s.api('GET', `/api/events?slug=${encodeURIComponent(A)}&type=sandbox.oom`);
      const events = (r.body as { events: { type: string; data: { limitBytes?: number } }[] }).events;
      return events.length > 0 ? events : null;
    });
    expect(oom[0]?.data.limitBytes).toBeGreaterThan(0);
  });

  it('a sandbox killed outright is reported stopped with the reason at once, and B and the server carry on', async () => {
    execFileSync('docker', ['kill', '--signal', 'KILL', container(A)]);
    const w = await waitFor('A reported stopped', async () => {
      const r = await s.api('GET', `/api/workspaces/${encodeURIComponent(A)}`);
      const ws = (r.body as { workspace: { state: string; failureReason: string | null } }).workspace;
      return ws.state === 'stopped' ? ws : null;
    });
    // Docker's OOMKilled flag stays set once any process was killed for memory since the start (the hog above).
    expect(w.failureReason).toMatch(/^the sandbox stopped unexpectedly: it exited with code 137( \(out of memory\))?$/);
    await bStillServes();
    expect((await s.api('POST', `/api/workspaces/${encodeURIComponent(A)}/start`)).status).toBe(200);
    await waitFor('A reopened', async () => (await s.api('GET', `/w/${A}/health`)).status === 200);
  });
});
