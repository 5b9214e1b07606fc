// Issue 14, 5a and 8, from inside a real hardened sandbox (the Docker driver and image Grove uses), as uid 1000,
// against the host's listeners in this process: host.sock and provider.sock (the credential relay), mounted at
// /run/grove. The relay's upstream is a local fake of the Messages API on 127.0.0.1. Needs Docker and the image.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BACKEND_GID, BACKEND_UID, LABELS, SANDBOX_GID, SANDBOX_UID, containerName, createDockerDriver } from '@grove/sandbox';
import type { SandboxSpec } from '@grove/sandbox';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOOK_LIMITS, HostServices } from './host-services.ts';
import { RELAY_LIMITS } from '@grove/egress';
import type { RelayRecord } from '@grove/egress';
import { startFakeAnthropic } from '../../egress/src/test-support/fake-anthropic.ts';
import type { FakeAnthropic } from '../../egress/src/test-support/fake-anthropic.ts';

const IMAGE = process.env.GROVE_SANDBOX_IMAGE ?? 'grove-sandbox:latest';
const INSTANCE = `l${randomBytes(4).toString('hex')}`;
const SLUG = 'lst~a';
const OTHER = 'lst~b';
const driver = createDockerDriver({ instance: INSTANCE });
const root = mkdtempSync(join(tmpdir(), 'grove-listeners-docker-'));
const runDir = (slug: string) => join(root, 'run', slug);
let fake: FakeAnthropic;
let host: HostServices | null = null;
const turns: string[] = [];
const relayed: RelayRecord[] = [];
/** The backend's user in the sandbox (root there): the only one that can reach the host's sockets. */
const BACKEND_USER = `${BACKEND_UID}:${BACKEND_GID}`;

/**
 * Runs a node script inside the sandbox, as the agent's uid unless `user` says otherwise; `onLine` sees each stdout
 * line as it comes. The host's sockets are reachable only by the backend's user (root in the sandbox), so a flood
 * of them stands for a backend the agent managed to exploit.
 */
function insideNode(script: string, args: string[], onLine: (line: string) => void = () => undefined, user = `${SANDBOX_UID}:${SANDBOX_GID}`): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    const p = spawn('docker', ['exec', '-u', user, containerName(INSTANCE, SLUG), 'node', '-e', script, ...args]);
    let out = '';
    let err = '';
    let partial = '';
    p.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      partial += d.toString();
      const lines = partial.split('\n');
      partial = lines.pop() ?? '';
      for (const l of lines) onLine(l);
    });
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('close', (code) => resolve({ code: code ?? -1, out, err }));
  });
}

/** The attacker: opens `count` connections to a socket, holds every one the server keeps, reports, holds on. */
const FLOOD = `
const net = require('net');
const [path, count, holdMs] = [process.argv[1], Number(process.argv[2]), Number(process.argv[3])];
const socks = [];
let connected = 0, refused = 0;
const one = () => new Promise((r) => {
  const s = net.connect(path);
  s.on('connect', () => { connected++; r(); });
  s.on('error', () => { refused++; r(); });
  socks.push(s);
});
(async () => {
  for (let i = 0; i < count; i += 100) await Promise.all(Array.from({ length: Math.min(100, count - i) }, one));
  await new Promise((r) => setTimeout(r, 1000));
  console.log(JSON.stringify({ connected, refused, open: socks.filter((s) => !s.destroyed).length }));
  await new Promise((r) => setTimeout(r, holdMs));
  process.exit(0);
})();
`;

/** Requests from inside, in order; prints one JSON line per answer. */
const CALLS = `
const http = require('http');
const [target, calls] = [process.argv[1], JSON.parse(process.argv[2])];
const opts = target.startsWith('/') ? { socketPath: target } : { host: '127.0.0.1', port: Number(target) };
(async () => {
  for (const c of calls) {
    const r = await new Promise((resolve) => {
      const req = http.request({ ...opts, method: c.method, path: c.path, headers: { 'content-type': 'application/json', 'x-api-key': 'grove-placeholder-key' } }, (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode, body }));
      });
      req.on('error', (e) => resolve({ status: 0, body: e.message }));
      req.end(c.body === undefined ? undefined : JSON.stringify(c.body));
    });
    console.log(JSON.stringify(r));
  }
})();
`;

async function callsInside(target: string, calls: Array<{ method: string; path: string; body?: unknown }>, user?: string): Promise<Array<{ status: number; body: string }>> {
  const r = await insideNode(CALLS, [target, JSON.stringify(calls)], undefined, user);
  return r.out.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as { status: number; body: string });
}

function fds(): number {
  return readdirSync('/proc/self/fd').length;
}

function turnEndedFromHost(slug: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ socketPath: join(runDir(slug), 'host.sock'), path: '/turn-ended', method: 'POST', agent: false, headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', () => resolve(0));
    req.end(JSON.stringify({ turn: 'turn-1', status: 'completed' }));
  });
}

function health(): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ socketPath: join(runDir(SLUG), 'backend.sock'), path: '/health' }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', () => resolve(0));
    req.end();
  });
}

/**
 * Floods `socket` from inside with `count` connections; meanwhile samples this process's descriptors and, once
 * the attacker holds what it got, checks that the other workspace's host.sock answers.
 */
async function flood(socket: string, count: number): Promise<{ report: { connected: number; refused: number; open: number }; grew: number; otherDuring: number }> {
  const baseline = fds();
  let peak = baseline;
  const sampler = setInterval(() => (peak = Math.max(peak, fds())), 20);
  let otherDuring: Promise<number> = Promise.resolve(-1);
  try {
    const r = await insideNode(
      FLOOD,
      [`/run/grove/${socket}`, String(count), '1500'],
      () => {
        peak = Math.max(peak, fds());
        otherDuring = turnEndedFromHost(OTHER);
      },
      BACKEND_USER,
    );
    const line = r.out.trim().split('\n')[0] ?? '';
    if (!line.startsWith('{')) throw new Error(`the flood did not run: ${r.out} ${r.err}`);
    return { report: JSON.parse(line) as { connected: number; refused: number; open: number }, grew: peak - baseline, otherDuring: await otherDuring };
  } finally {
    clearInterval(sampler);
  }
}

beforeAll(async () => {
  await driver.ping();
  if (!(await driver.imageExists(IMAGE))) throw new Error(`${IMAGE} is missing: run \`npm run setup\` first`);
  fake = await startFakeAnthropic();
  const common = join(root, 'repo');
  const spec: SandboxSpec = {
    slug: SLUG,
    project: 'lst',
    image: IMAGE,
    worktreePath: join(root, 'worktree'),
    sandboxGitDir: join(root, 'sandbox-git', SLUG),
    gitCommonDir: common,
    runDir: runDir(SLUG),
    threadDir: join(root, 'threads', SLUG),
    stateDir: join(root, 'state', SLUG),
    env: { GROVE_SLUG: SLUG, GROVE_PROJECT: 'lst' },
    limits: { memoryBytes: 512 * 1024 * 1024, nanoCpus: 1_000_000_000, pids: 256 },
  };
  mkdirSync(join(common, 'worktrees'), { recursive: true });
  for (const d of [spec.worktreePath, spec.sandboxGitDir, spec.stateDir]) {
    mkdirSync(d, { recursive: true });
    chownSync(d, SANDBOX_UID, SANDBOX_GID);
  }
  // The backend's (root's, 0700), as core makes them.
  for (const d of [runDir(SLUG), runDir(OTHER), spec.threadDir]) mkdirSync(d, { recursive: true, mode: 0o700 });
  host = new HostServices({
    logger: pino({ level: process.env.GROVE_TEST_LOG ?? 'silent' }),
    runDir,
    onTurnEnded: async (slug, req) => {
      turns.push(`${slug}:${req.turn}`);
      return { events: [] };
    },
    providerRelay: { upstream: new URL(fake.url), apiKey: `sk-ant-test-${randomBytes(8).toString('hex')}`, onRequest: (r) => relayed.push(r) },
    socketOwner: { uid: BACKEND_UID, gid: BACKEND_GID },
  });
  await host.ensure(SLUG);
  await host.ensure(OTHER);
  await driver.ensure(spec);
  const deadline = Date.now() + 60_000;
  while ((await health()) !== 200) {
    if (Date.now() > deadline) throw new Error(`backend did not start: ${await driver.logs(SLUG, 30)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}, 120_000);

afterAll(async () => {
  await host?.closeAll();
  const ids = execFileSync('docker', ['ps', '-aq', '--filter', `label=${LABELS.instance}=${INSTANCE}`], { encoding: 'utf8' }).split('\n').filter(Boolean);
  if (ids.length) spawnSync('docker', ['rm', '-f', ...ids]);
  await fake?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('host listeners under a hostile sandbox', () => {
  // Before: one sandbox held 6,000 connections and the server's descriptors went 55 -> 6,055.
  it.each([
    ['host.sock', HOOK_LIMITS.maxConnections],
    ['provider.sock', RELAY_LIMITS.maxConnections],
  ] as const)('%s is out of the agent\'s reach, and holds at most its connection cap against 1,500 connections from the backend\'s user; the other workspace answers meanwhile', async (socket, cap) => {
    const agent = await insideNode(FLOOD, [`/run/grove/${socket}`, '5', '0']);
    expect(JSON.parse(agent.out.trim().split('\n')[0] ?? '{}')).toMatchObject({ connected: 0, refused: 5 });
    const { report, grew, otherDuring } = await flood(socket, 1_500);
    // The attack ran: the kernel accepted the connections, the server closed all but its cap.
    expect(report.connected + report.refused).toBe(1_500);
    expect(report.connected).toBeGreaterThan(cap);
    expect(report.open).toBeLessThanOrEqual(cap);
    // The host process never held many more descriptors than the cap (slack: docker exec's pipes, the sampler).
    expect(grew).toBeLessThanOrEqual(cap + 24);
    expect(otherDuring).toBe(200);
    // Once the attacker is gone, the workspace's own backend reaches host.sock again.
    const after = await callsInside('/run/grove/host.sock', [{ method: 'POST', path: '/turn-ended', body: { turn: 'turn-9', status: 'completed' } }], BACKEND_USER);
    expect(after[0]?.status).toBe(200);
  }, 120_000);

  // Before: the relay forwarded any method to any /v1/ path with the host's key.
  it('the credential relay, through the sandbox port 127.0.0.1:3129, forwards only the Messages API calls', async () => {
    const before = fake.requests.length;
    const recordsBefore = relayed.length;
    const denied = [
      { method: 'DELETE', path: '/v1/files/file_011CNha8iCJcU1wXNR6q4V8w', rule: 'path-not-relayed' },
      { method: 'GET', path: '/v1/organizations/users', rule: 'path-not-relayed' },
      { method: 'POST', path: '/v1/messages/batches', rule: 'path-not-relayed' },
      { method: 'PROPFIND', path: '/v1/messages', rule: 'method-not-allowed' },
      { method: 'POST', path: '/v1/messages?beta=true&anthropic_api_key=x', rule: 'query-not-allowed' },
    ];
    const results = await callsInside('3129', [
      // GET and DELETE go without a body, as a client would send them (so the old relay forwarded them too).
      ...denied.map(({ method, path }) => (method === 'GET' || method === 'DELETE' ? { method, path } : { method, path, body: {} })),
      { method: 'POST', path: '/v1/messages?beta=true', body: { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] } },
    ]);
    expect(results).toHaveLength(denied.length + 1);
    denied.forEach((d, i) => {
      const r = results[i];
      const where = `${d.method} ${d.path}: ${r?.status} ${r?.body}`;
      expect(r?.status, where).toBe(403);
      expect(JSON.parse(r?.body ?? '{}'), where).toMatchObject({ code: 'egress_denied', rule: d.rule });
    });
    expect(results.at(-1)?.status).toBe(200);
    expect(results.at(-1)?.body).toContain('event: message_stop');
    // Only the allowed call reached the provider; every call, refused or not, is in the audit trail.
    expect(fake.requests.slice(before).map((r) => `${r.method} ${r.url}`)).toEqual(['POST /v1/messages?beta=true']);
    expect(relayed.slice(recordsBefore).map((r) => `${r.status} ${r.method} ${r.rule ?? ''}`)).toEqual([
      ...denied.map((d) => `403 ${d.method} ${d.rule}`),
      '200 POST messages',
    ]);
  }, 60_000);
});
