// The SSRF corpus from inside a real hardened sandbox (the Docker driver and image Grove uses), through
// the backend's relay on 127.0.0.1:3128, to a gate on the host. The gate here has the test resolver
// hook and a connector that refuses anything but loopback, so no case can ever put a packet on a
// non-loopback address, even if the gate were wrong. Needs Docker and the image (npm run setup).
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, request } from 'node:http';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EgressDecision } from '@grove/contracts';
import { BACKEND_GID, BACKEND_UID, LABELS, SANDBOX_GID, SANDBOX_UID, containerName, createDockerDriver } from '@grove/sandbox';
import type { SandboxSpec } from '@grove/sandbox';
// Core's own table of proxy variables: the sandbox gets exactly what core gives every workspace.
import { PROXY_ENV } from '../../runtime/src/egress-gates.ts';
import { corpusResolver, loadCorpus, loopbackConnector } from './corpus.ts';
import type { Corpus } from './corpus.ts';
import { createGate } from './gate.ts';
import type { ConnectTarget, Gate } from './gate.ts';
import { PROBE_SOURCE, PROMISED_ENV, parseResponse, probeArg, probeCases } from './probe.ts';
import type { ProbeCase, ProbeResult } from './probe.ts';

const IMAGE = process.env.GROVE_SANDBOX_IMAGE ?? 'grove-sandbox:latest';
const INSTANCE = `e${randomBytes(4).toString('hex')}`;
const SLUG = 'egr~probe';
const RELAY = { host: '127.0.0.1', port: 3128 };

const driver = createDockerDriver({ instance: INSTANCE });
const root = mkdtempSync(join(tmpdir(), 'grove-egress-docker-'));
const runDir = join(root, 'run', SLUG);
const socketPath = join(runDir, 'egress.sock');
let upstream: Server;
let upPort = 0;
const upstreamRequests: string[] = [];
let corpus: Corpus;
let gate: Gate | null = null;
const decisions: EgressDecision[] = [];
const connects: ConnectTarget[] = [];
const violations: ConnectTarget[] = [];
const HEADERS_TIMEOUT_MS = 2_000;
const MAX_TUNNELS = 64; // the gate's default, which this test's gate keeps

/** Opens `n` tunnels through the relay at once and holds them; then one more; then frees one and retries. */
const TUNNEL_LIMIT_SOURCE = String.raw`
const net = require('net');
const { target, n } = JSON.parse(process.argv[1]);
function tunnel() {
  return new Promise((resolve) => {
    const s = net.connect(3128, '127.0.0.1');
    let b = '';
    const done = () => resolve({ s, head: b });
    s.on('connect', () => s.write('CONNECT ' + target + ' HTTP/1.1\r\nHost: ' + target + '\r\n\r\n'));
    s.on('data', (d) => { b += d; if (b.includes('\r\n\r\n')) done(); });
    s.on('error', (e) => { b += 'ERR ' + e.code; done(); });
    s.on('close', done);
  });
}
(async () => {
  const open = await Promise.all(Array.from({ length: n }, tunnel));
  const ok = open.filter((t) => /^HTTP\/1\.1 200/.test(t.head)).length;
  const over = await tunnel();
  open[0].s.destroy();
  let again = null;
  for (let i = 0; i < 50; i++) {
    await new Promise((r) => setTimeout(r, 100));
    again = await tunnel();
    if (/^HTTP\/1\.1 200/.test(again.head)) break;
    again.s.destroy();
  }
  console.log(JSON.stringify({ ok, over: over.head, again: again && again.head }));
  process.exit(0);
})();
`;

/** Drips a request head through the relay, one byte every 200 ms, and reports what came back when it was closed. */
const DRIP_SOURCE = String.raw`
const net = require('net');
const { target, giveUpMs } = JSON.parse(process.argv[1]);
const s = net.connect(3128, '127.0.0.1');
let b = '';
let drip = null;
s.on('connect', () => {
  s.write('CONNECT ' + target + ' HTTP/1.1\r\nX-Drip: ');
  drip = setInterval(() => s.write('x'), 200);
});
s.on('data', (d) => (b += d));
s.on('error', () => undefined);
s.on('close', () => { clearInterval(drip); console.log(JSON.stringify({ closed: true, text: b })); process.exit(0); });
setTimeout(() => { console.log(JSON.stringify({ closed: false, text: b })); process.exit(0); }, giveUpMs);
`;

/** Names the current gate looked up, in order (a new gate, a new resolver and a new list). */
let resolved: string[] = [];

async function startGate(): Promise<Gate> {
  resolved = [];
  const g = createGate({
    slug: SLUG,
    socketPath,
    policy: corpus.policy,
    audit: (d) => decisions.push(d),
    resolver: corpusResolver(corpus, resolved),
    connect: loopbackConnector({ corpus, log: connects, violations }),
    // Shorter than the 10 s default only so the drip test below does not wait that long.
    headersTimeoutMs: HEADERS_TIMEOUT_MS,
    // Only the backend (root in the sandbox) connects, as in core.
    socketOwner: { uid: BACKEND_UID, gid: BACKEND_GID },
  });
  await g.listen();
  return g;
}

const run = promisify(execFile);

// Asynchronous on purpose: the gate lives in this process, so a synchronous exec would block the very
// event loop that has to answer the sandbox.
async function sh(script: string): Promise<{ code: number; out: string }> {
  try {
    const r = await run('docker', ['exec', '-u', `${SANDBOX_UID}:${SANDBOX_GID}`, containerName(INSTANCE, SLUG), 'sh', '-c', script], { encoding: 'utf8' });
    return { code: 0, out: `${r.stdout}${r.stderr}` };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof err.code === 'number' ? err.code : -1, out: `${err.stdout ?? ''}${err.stderr ?? ''}` };
  }
}

/** Run the probe inside the sandbox against the relay. */
async function probeInside(cases: ProbeCase[]): Promise<ProbeResult[]> {
  const r = await run('docker', ['exec', '-u', `${SANDBOX_UID}:${SANDBOX_GID}`, containerName(INSTANCE, SLUG), 'node', '-e', PROBE_SOURCE, probeArg(RELAY, cases)], {
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
  });
  return JSON.parse(r.stdout) as ProbeResult[];
}

async function until(cond: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

function health(): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ socketPath: join(runDir, 'backend.sock'), path: '/health' }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', () => resolve(0));
    req.end();
  });
}

beforeAll(async () => {
  await driver.ping();
  if (!(await driver.imageExists(IMAGE))) throw new Error(`${IMAGE} is missing: run \`npm run setup\` first`);
  upstream = createServer((req, res) => {
    upstreamRequests.push(`${req.method} ${req.url}`);
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(`upstream-ok ${req.method} ${req.url}`);
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const addr = upstream.address();
  upPort = typeof addr === 'object' && addr ? addr.port : 0;
  corpus = loadCorpus(upPort);

  // A minimal Grove home for one workspace: the mounts exist, nothing else of the host is shared.
  const common = join(root, 'repo');
  const spec: SandboxSpec = {
    slug: SLUG,
    project: 'egr',
    image: IMAGE,
    worktreePath: join(root, 'worktree'),
    sandboxGitDir: join(root, 'sandbox-git', SLUG),
    gitCommonDir: common,
    runDir,
    threadDir: join(root, 'threads', SLUG),
    stateDir: join(root, 'state', SLUG),
    env: { GROVE_SLUG: SLUG, GROVE_PROJECT: 'egr', ...PROXY_ENV },
    limits: { memoryBytes: 256 * 1024 * 1024, nanoCpus: 500_000_000, pids: 128 },
  };
  mkdirSync(join(common, 'worktrees'), { recursive: true });
  for (const d of [spec.worktreePath, spec.sandboxGitDir, spec.stateDir]) {
    mkdirSync(d, { recursive: true });
    if (process.getuid?.() === 0) chownSync(d, SANDBOX_UID, SANDBOX_GID);
  }
  // The backend's (root's, 0700), as core makes them.
  for (const d of [runDir, spec.threadDir]) mkdirSync(d, { recursive: true, mode: 0o700 });
  gate = await startGate();
  await driver.ensure(spec);
  const deadline = Date.now() + 30_000;
  while ((await health()) !== 200) {
    if (Date.now() > deadline) throw new Error(`backend did not start: ${await driver.logs(SLUG, 30)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
});

afterAll(async () => {
  await gate?.close();
  const ids = execFileSync('docker', ['ps', '-aq', '--filter', `label=${LABELS.instance}=${INSTANCE}`], { encoding: 'utf8' }).split('\n').filter(Boolean);
  if (ids.length) spawnSync('docker', ['rm', '-f', ...ids]);
  await new Promise((r) => upstream?.close(r));
  rmSync(root, { recursive: true, force: true });
});

describe('the SSRF corpus from inside a real sandbox', () => {
  it('is the only way out: the sandbox has only loopback, and the relay listens there', async () => {
    expect((await sh('ls /sys/class/net')).out.trim().split(/\s+/)).toEqual(['lo']);
    expect((await sh('cat /proc/net/route')).out.trim().split('\n')).toHaveLength(1); // header only: no IPv4 route at all

    // The environment the container really has, not the spec handed to the driver: the engine's
    // record, and every process in it, read from the host (which sees all of them, whoever they run as).
    const name = containerName(INSTANCE, SLUG);
    const configEnv = JSON.parse(execFileSync('docker', ['inspect', '--format', '{{json .Config.Env}}', name], { encoding: 'utf8' })) as string[];
    expect(configEnv.filter((e) => /^(https?|no)_proxy=/i.test(e)).sort()).toEqual(PROMISED_ENV);
    const pids = execFileSync('docker', ['top', name, '-eo', 'pid'], { encoding: 'utf8' }).trim().split('\n').slice(1).map((l) => l.trim());
    expect(pids.length).toBeGreaterThan(0);
    for (const pid of pids) {
      const env = readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0');
      expect(env, `pid ${pid}`).toContain(`GROVE_SLUG=${SLUG}`);
      expect(env.filter((e) => /^(https?|no)_proxy=/i.test(e)).sort(), `pid ${pid}`).toEqual(PROMISED_ENV);
    }

    // Something listens on 127.0.0.1:3128 inside (a LISTEN row in the sandbox's own /proc/net/tcp) ...
    const tcp = await sh('cat /proc/net/tcp');
    expect(tcp.code, tcp.out).toBe(0);
    const listening = tcp.out.split('\n').slice(1).map((l) => l.trim().split(/\s+/)).filter((f) => f[3] === '0A').map((f) => f[1]);
    expect(listening).toContain('0100007F:0C38');
    // ... and it is this workspace's gate that answers there: a name only this test uses comes back as
    // the gate's refusal, and this gate audited it (it is not in the policy, so it is never resolved).
    const marker = `relay-check-${INSTANCE}.test`;
    const start = decisions.length;
    const [r] = await probeInside([{ id: 'relay', text: `CONNECT ${marker}:443 HTTP/1.1\r\nHost: ${marker}:443\r\n\r\n` }]);
    const res = parseResponse(r?.text ?? '');
    expect(res.status, r?.text).toBe(403);
    expect(JSON.parse(res.body)).toMatchObject({ code: 'egress_denied', rule: 'not-in-policy', host: marker });
    await until(() => decisions.length > start);
    expect(decisions.slice(start)).toEqual([expect.objectContaining({ slug: SLUG, host: marker, decision: 'deny', rule: 'not-in-policy' })]);
    expect(resolved).not.toContain(marker);
  });

  it('denies every deny case before any connection, audits every case, and lets every allow case through', async () => {
    const start = decisions.length;
    const connectsBefore = connects.length;
    const resolvedBefore = resolved.length;
    const before = upstreamRequests.length;
    const results = await probeInside(probeCases(corpus.cases));
    await until(() => decisions.length - start === corpus.cases.length);
    const mine = decisions.slice(start);
    const allowed = corpus.cases.filter((c) => c.expect === 'allow');
    corpus.cases.forEach((c, i) => {
      const r = results[i];
      const res = parseResponse(r?.text ?? '');
      const where = `${c.id}: ${r?.text.slice(0, 300)} ${r?.err ?? ''}`;
      if (c.expect === 'deny') {
        expect(res.status, where).toBe(c.status ?? 403);
        expect((JSON.parse(res.body) as { rule: string }).rule, where).toBe(c.rule);
        expect(mine[i], where).toMatchObject({ slug: SLUG, decision: 'deny', rule: c.rule, bytesIn: 0, bytesOut: 0 });
      } else {
        expect(res.body, where).toMatch(/^upstream-ok /);
        expect(mine[i], where).toMatchObject({ slug: SLUG, decision: 'allow', rule: c.rule, address: c.address ?? '127.0.0.1', port: upPort });
        expect(mine[i]?.bytesIn, where).toBeGreaterThan(0);
      }
    });
    expect(violations).toEqual([]);
    // One connection per allowed case, in order, to the address the gate checked.
    expect(connects.slice(connectsBefore).map((t) => `${t.address}:${t.port}`)).toEqual(allowed.map((c) => `${c.address ?? '127.0.0.1'}:${upPort}`));
    expect(upstreamRequests.length - before).toBe(allowed.length);
    // DNS rebinding: each name whose next answer would be 127.0.0.1 was looked up exactly once.
    const lookups = resolved.slice(resolvedBefore);
    for (const n of Object.keys(corpus.resolverSequences)) expect(lookups.filter((l) => l === n), n).toEqual([n]);
  });

  it('carries an ordinary client that honours http_proxy (git over HTTP) through the gate', async () => {
    const before = upstreamRequests.length;
    // git (libcurl) sends the absolute URL to the proxy and never resolves the name itself.
    // The test upstream is no git server: what git makes of the answer does not matter, that it got one does.
    await sh(`git ls-remote http://upstream.test:${upPort}/repo.git 2>&1`);
    await until(() => upstreamRequests.length > before);
    expect(upstreamRequests.slice(before)[0]).toMatch(/^GET \/repo\.git\/info\/refs\?service=git-upload-pack$/);
    expect(decisions.at(-1)).toMatchObject({ method: 'HTTP', host: 'upstream.test', decision: 'allow' });
    // A name outside the policy: refused by the gate, never resolved, nothing reaches the upstream.
    const denied = await sh('git ls-remote http://evil.test/repo.git 2>&1');
    expect(denied.code).not.toBe(0);
    expect(denied.out).toMatch(/403/);
  });

  it('limits a sandbox to 64 open tunnels: the next one is refused 429 tunnel-limit, and a freed slot is reused', async () => {
    await until(() => gate?.active() === 0);
    const start = decisions.length;
    const arg = JSON.stringify({ target: `127.0.0.1:${upPort}`, n: MAX_TUNNELS });
    const r = await run('docker', ['exec', '-u', `${SANDBOX_UID}:${SANDBOX_GID}`, containerName(INSTANCE, SLUG), 'node', '-e', TUNNEL_LIMIT_SOURCE, arg], { encoding: 'utf8' });
    const out = JSON.parse(r.stdout) as { ok: number; over: string; again: string | null };
    expect(out.ok).toBe(MAX_TUNNELS);
    expect(out.over).toMatch(/^HTTP\/1\.1 429 /);
    expect(out.over).toMatch(/\r\nx-grove-egress-rule: tunnel-limit\r\n/i);
    expect(out.again).toMatch(/^HTTP\/1\.1 200 /);
    await until(() => gate?.active() === 0);
    const mine = decisions.slice(start);
    expect(mine.filter((d) => d.decision === 'deny').map((d) => d.rule)).toContain('tunnel-limit');
    expect(mine.filter((d) => d.decision === 'allow')).toHaveLength(MAX_TUNNELS + 1);
  });

  it('closes a client that drips its request head past the header timeout, before connecting anything', async () => {
    const start = decisions.length;
    const connectsBefore = connects.length;
    const arg = JSON.stringify({ target: `127.0.0.1:${upPort}`, giveUpMs: HEADERS_TIMEOUT_MS + 8_000 });
    const r = await run('docker', ['exec', '-u', `${SANDBOX_UID}:${SANDBOX_GID}`, containerName(INSTANCE, SLUG), 'node', '-e', DRIP_SOURCE, arg], { encoding: 'utf8' });
    const out = JSON.parse(r.stdout) as { closed: boolean; text: string };
    expect(out.closed, out.text).toBe(true);
    expect(out.text).toMatch(/^HTTP\/1\.1 40[08] /);
    expect(connects.length).toBe(connectsBefore);
    expect(decisions.length).toBe(start);
  });

  it('without the gate there is no way out: the relay answers 502 and nothing is connected', async () => {
    await gate?.close();
    gate = null;
    const connectsBefore = connects.length;
    const [r] = await probeInside([{ id: 'no-gate', text: `CONNECT 127.0.0.1:${upPort} HTTP/1.1\r\n\r\n` }]);
    const res = parseResponse(r?.text ?? '');
    expect(res.status).toBe(502);
    expect(JSON.parse(res.body)).toMatchObject({ code: 'egress_upstream', rule: 'gate-unavailable' });
    expect(connects.length).toBe(connectsBefore);
    // A new gate on the same socket path is picked up by the next connection: no container restart.
    gate = await startGate();
    const [again] = await probeInside(probeCases(corpus.cases.filter((c) => c.id === 'allow-ip-rule')));
    expect(parseResponse(again?.text ?? '').body).toMatch(/^upstream-ok /);
  });
});
