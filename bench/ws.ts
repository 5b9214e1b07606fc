// Benchmark: WebSocket streaming of 100-byte frames, straight to a Unix-socket WebSocket server vs through Grove's
// front door (/w/<slug>/stream), beside two yardsticks in the same run: nginx (1 worker) and a bare node relay that
// pipes bytes untouched; 1/10/50 streams.
// Flood: each stream keeps 64 frames in flight (acked by the client) → messages/s; paced: each stream at
// BENCH_WS_RATE frames/s → delivery latency (server send → client receive, one monotonic clock, separate processes).
// Run: npm run bench:ws -w @grove/bench   (env BENCH_SECONDS, BENCH_ROUNDS, BENCH_WS_RATE)
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { WebSocket } from 'ws';
import { fmt, machineNote, mkTemp, onCleanup, pct, sleep, startNginx, stopChildren, table } from './lib.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const seconds = Number(process.env.BENCH_SECONDS ?? 6);
const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const rate = Number(process.env.BENCH_WS_RATE ?? 100);
const WINDOW = 64;
const ACK_EVERY = 16;
const WARMUP_MS = 500;
const STREAMS = [1, 10, 50];
const TOKEN = 'bench-token-0123456789';
const DIRECT = 'direct unix socket';
const GROVE = 'Grove /w/<slug>/stream';
const NGINX = 'nginx, 1 worker';
const RELAY = 'bare node relay (pipe)';
const PREFIX_LEN = '{"type":"delta","turn":"bench","text":"'.length;
const dir = mkTemp('ws');
const socketPath = path.join(dir, 'ws.sock');
const children: ChildProcess[] = [];

function child(script: string, args: string[]): Promise<Record<string, unknown>> {
  const c = spawn(process.execPath, ['--import', 'tsx', path.join(here, script), ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(c);
  return new Promise((resolve, reject) => {
    c.once('exit', (code) => reject(new Error(`${script} exited ${code}`)));
    readline.createInterface({ input: c.stdout! }).once('line', (l) => resolve(JSON.parse(l) as Record<string, unknown>));
  });
}

interface Result { msgs: number; p50: number; p99: number }
/** One round's raw figures: frames counted, over how many seconds, and each one's latency in ms. */
interface Sample { counted: number; elapsed: number; lat: number[] }

/** Open n streams, measure for `secs` after a warm-up, close them. Latencies in ms. */
async function measure(url: (q: string) => string, headers: Record<string, string>, n: number, mode: 'flood' | 'paced', secs: number): Promise<Sample> {
  const q = mode === 'flood' ? `mode=flood&window=${WINDOW}` : `mode=paced&rate=${rate}`;
  const lat: number[] = [];
  let counted = 0;
  let measuring = false;
  const socks = await Promise.all(
    Array.from({ length: n }, () => {
      const ws = new WebSocket(url(q), { headers, perMessageDeflate: false });
      let received = 0;
      ws.on('message', (m) => {
        const t = process.hrtime.bigint();
        received++;
        if (mode === 'flood' && received % ACK_EVERY === 0) ws.send(String(received));
        if (!measuring) return;
        const s = String(m);
        const sent = BigInt(s.slice(PREFIX_LEN, s.indexOf(':', PREFIX_LEN)));
        lat.push(Number(t - sent) / 1e6);
        counted++;
      });
      return new Promise<WebSocket>((resolve, reject) => {
        ws.once('open', () => resolve(ws));
        ws.once('error', reject);
        ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
      });
    }),
  );
  await sleep(WARMUP_MS);
  measuring = true;
  const t0 = performance.now();
  await sleep(secs * 1000);
  measuring = false;
  const elapsed = (performance.now() - t0) / 1000;
  // Close and wait, so the next cell starts on an idle upstream; a stuck close is cut after 2 s.
  await Promise.all(
    socks.map(
      (ws) =>
        new Promise<void>((resolve) => {
          if (ws.readyState === WebSocket.CLOSED) return resolve();
          const timer = setTimeout(() => ws.terminate(), 2_000);
          ws.once('close', () => {
            clearTimeout(timer);
            resolve();
          });
          ws.close();
        }),
    ),
  );
  return { counted, elapsed, lat };
}

/** The rounds of one cell taken together: all frames over all measured time, percentiles over all latencies. */
function combine(samples: readonly Sample[]): Result {
  const counted = samples.reduce((a, s) => a + s.counted, 0);
  const elapsed = samples.reduce((a, s) => a + s.elapsed, 0);
  const lat = samples.flatMap((s) => s.lat);
  return { msgs: counted / elapsed, p50: pct(lat, 50), p99: pct(lat, 99) };
}

async function main(): Promise<void> {
  console.log(`WebSocket streaming: 100-byte frames, ${seconds} s per cell in ${rounds} rounds (each after ${WARMUP_MS} ms warm-up), flood window ${WINDOW}/stream, paced ${rate} frames/s/stream; ${machineNote()}`);
  await child('ws-upstream.ts', [socketPath]);
  const { grove } = (await child('proxy-targets.ts', ['grove', socketPath])) as { grove: number };
  const { relay } = (await child('proxy-targets.ts', ['relay', socketPath])) as { relay: number };
  const nginx = await startNginx({ dir, children, upstream: socketPath, name: 'WebSocket', websocket: true });
  const targets: Array<{ name: string; url: (q: string) => string; headers: Record<string, string> }> = [
    { name: DIRECT, url: (q: string) => `ws+unix://${socketPath}:/stream?${q}`, headers: {} },
    { name: GROVE, url: (q: string) => `ws://127.0.0.1:${grove}/w/bench/stream?${q}`, headers: { authorization: `Bearer ${TOKEN}` } },
    ...(nginx ? [{ name: NGINX, url: (q: string) => `ws://127.0.0.1:${nginx}/stream?${q}`, headers: {} }] : []),
    { name: RELAY, url: (q: string) => `ws://127.0.0.1:${relay}/stream?${q}`, headers: {} },
  ];
  const rows: Array<Array<string | number>> = [];
  const results = new Map<string, { flood: Result; paced: Result }>();
  for (const n of STREAMS) {
    const samples = new Map(targets.map((t) => [t.name, { flood: [] as Sample[], paced: [] as Sample[] }]));
    // Round-robin, as bench/proxy.ts does: a burst of someone else's load lands on every target, not on one.
    for (let r = 0; r < rounds; r++) {
      for (const t of targets) {
        const s = samples.get(t.name)!;
        s.flood.push(await measure(t.url, t.headers, n, 'flood', seconds / rounds));
        s.paced.push(await measure(t.url, t.headers, n, 'paced', seconds / rounds));
      }
    }
    for (const t of targets) {
      const s = samples.get(t.name)!;
      const flood = combine(s.flood);
      const paced = combine(s.paced);
      results.set(`${t.name}/${n}`, { flood, paced });
      rows.push([t.name, n, fmt(flood.msgs), fmt(flood.p50, 2), fmt(flood.p99, 2), fmt(paced.msgs), fmt(paced.p50, 2), fmt(paced.p99, 2)]);
    }
  }
  console.log('');
  table(['target', 'streams', 'flood msg/s', 'flood p50 ms', 'flood p99 ms', 'paced msg/s', 'paced p50 ms', 'paced p99 ms'], rows);
  // Issue 16's goal: messages through the front door at least 0.9x of straight to the socket.
  console.log('\nflood msg/s against direct (goal for Grove: >= 0.90x), paced p99 ms:');
  const ratioRows = STREAMS.flatMap((n) => {
    const d = results.get(`${DIRECT}/${n}`);
    return targets
      .filter((t) => t.name !== DIRECT)
      .map((t) => {
        const r = results.get(`${t.name}/${n}`);
        const x = (r?.flood.msgs ?? 0) / (d?.flood.msgs ?? 1);
        const verdict = t.name === GROVE ? (x >= 0.9 ? 'met' : 'missed') : '(yardstick)';
        return [t.name, n, `${fmt(x, 2)}x`, '>= 0.90x', verdict, `${fmt(r?.paced.p99 ?? Number.NaN, 2)} vs ${fmt(d?.paced.p99 ?? Number.NaN, 2)}`];
      });
  });
  table(['target', 'streams', 'flood vs direct', 'goal', '', 'paced p99 vs direct'], ratioRows);
  console.log(`after: ${machineNote()}`);
}

const done = onCleanup(async () => {
  await stopChildren(children);
  fs.rmSync(dir, { recursive: true, force: true });
});

main()
  .catch((e: unknown) => {
    console.error(e);
    process.exitCode = 1;
  })
  .finally(() => done());
