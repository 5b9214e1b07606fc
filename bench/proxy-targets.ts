// Child process for bench/proxy.ts and bench/ws.ts: the upstream (an HTTP server on a Unix socket), the
// proxies in front of it, or Grove's front door alone, so load generator, proxies and upstream each get a process.
import http from 'node:http';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import httpProxy from 'http-proxy';
import * as httpProxy3 from 'http-proxy-3';
import { pino } from 'pino';
import { createGrove } from '@grove/core';
import type { Grove } from '@grove/core';
import { openSqlite, projects, workspaces } from '@grove/db';
import { createDockerRuntime } from '@grove/runtime';
import type { SandboxDriver } from '@grove/sandbox';
import { createGroveServer } from '../apps/server/src/server.ts';

const [role, socketPath] = process.argv.slice(2);
if (!socketPath) throw new Error('usage: proxy-targets.ts upstream|proxies|grove|relay <socket>');

/**
 * The home of the front door over the real registry: its running row's backend.sock is a second listener of the
 * upstream process (a real socket, as the proxy checks: a symlink to the upstream is refused since issue 14).
 */
const realHome = path.join(path.dirname(socketPath), 'real-home');
const realSocket = path.join(realHome, 'run/bench/backend.sock');

const bodies: Record<string, Buffer> = { '/1k': Buffer.alloc(1024, 'a'), '/256k': Buffer.alloc(256 * 1024, 'b') };

async function listen(server: http.Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const a = server.address();
  if (!a || typeof a === 'string') throw new Error('no port');
  return a.port;
}

if (role === 'upstream') {
  fs.rmSync(socketPath, { force: true });
  const server = http.createServer((req, res) => {
    const body = bodies[req.url ?? ''] ?? bodies['/1k'];
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body?.length ?? 0 });
    res.end(body);
  });
  server.keepAliveTimeout = 60_000;
  fs.mkdirSync(path.dirname(realSocket), { recursive: true });
  fs.rmSync(realSocket, { force: true });
  const second = http.createServer(server.listeners('request')[0] as http.RequestListener);
  second.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => second.listen(realSocket, r));
  server.listen(socketPath, () => process.stdout.write(`${JSON.stringify({ ready: true })}\n`));
} else if (role === 'relay') {
  // A yardstick for bench/ws.ts, not a proxy: each TCP connection piped to its own connection to the socket, bytes
  // untouched (no auth, no routing, no HTTP). What node itself costs in the path, without anything Grove decides.
  const relay = net.createServer((client) => {
    client.setNoDelay(true);
    const up = net.connect({ path: socketPath });
    client.pipe(up).pipe(client);
    const close = () => {
      client.destroy();
      up.destroy();
    };
    client.on('error', close).on('close', close);
    up.on('error', close).on('close', close);
  });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
  const a = relay.address();
  if (!a || typeof a === 'string') throw new Error('no port');
  process.stdout.write(`${JSON.stringify({ relay: a.port })}\n`);
} else if (role === 'grove') {
  // Only the front door (auth, routing, http-proxy for HTTP and WebSocket upgrades); every slug maps to the socket.
  const stub = { socketFor: async () => socketPath } as unknown as Grove;
  const grove = createGroveServer({ grove: stub, logger: pino({ level: 'silent' }), token: 'bench-token-0123456789' });
  process.stdout.write(`${JSON.stringify({ grove: await grove.listen(0, '127.0.0.1') })}\n`);
} else {
  const agent = () => new http.Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64 });
  const target = { socketPath } as unknown as httpProxy.ProxyTarget;

  const p1 = httpProxy.createProxyServer({ agent: agent(), xfwd: true });
  const s1 = http.createServer((req, res) => p1.web(req, res, { target }));

  const p3 = httpProxy3.createProxyServer({ agent: agent(), xfwd: true });
  const s3 = http.createServer((req, res) => p3.web(req, res, { target: { socketPath } as never }));

  const stub = { socketFor: async () => socketPath } as unknown as Grove;
  const grove = createGroveServer({ grove: stub, logger: pino({ level: 'silent' }), token: 'bench-token-0123456789' });
  // And without the fast lane (GROVE_FAST_LANE=0): every request through node's HTTP server, as before it.
  const groveNoLane = createGroveServer({ grove: stub, logger: pino({ level: 'silent' }), token: 'bench-token-0123456789', fastLane: false });

  // The same front door over the real registry (SQLite, the per-request socketFor lookup), with a running row
  // whose backend.sock the upstream process also listens on; the runtime is never called on this path.
  const home = realHome;
  process.on('exit', () => fs.rmSync(home, { recursive: true, force: true }));
  process.on('SIGTERM', () => process.exit(0));
  const at = new Date().toISOString();
  const seed = openSqlite({ file: path.join(home, 'grove.db') });
  seed.db.insert(projects).values({ name: 'bench', source: '/nonexistent', defaultBranch: 'main', createdAt: at }).run();
  seed.db.insert(workspaces).values({ slug: 'bench', project: 'bench', name: 'default', isDefault: true, branch: 'grove/default', baseRef: 'main', state: 'running', createdAt: at, updatedAt: at }).run();
  await seed.close();
  const quiet = pino({ level: 'silent' });
  const real = await createGrove({ home, runtime: createDockerRuntime({ driver: {} as SandboxDriver, image: 'unused', logger: quiet }), maxRunning: 4, logger: quiet });
  const groveReal = createGroveServer({ grove: real, logger: pino({ level: 'silent' }), token: 'bench-token-0123456789' });

  const ports = { httpProxy: await listen(s1), httpProxy3: await listen(s3), grove: await grove.listen(0, '127.0.0.1'), groveReal: await groveReal.listen(0, '127.0.0.1'), groveNoLane: await groveNoLane.listen(0, '127.0.0.1') };
  process.stdout.write(`${JSON.stringify(ports)}\n`);
}
