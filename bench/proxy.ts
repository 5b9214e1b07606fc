// Benchmark: proxy overhead for 1 KiB and 256 KiB responses, side by side in one run:
// straight to the Unix socket, http-proxy and http-proxy-3 (both with a keep-alive agent), and
// Grove's front door (/w/<slug>/ with auth and routing, which uses http-proxy).
// Run: npm run bench:proxy -w @grove/bench   (env BENCH_SECONDS, BENCH_CONNECTIONS)
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

const here = path.dirname(fileURLToPath(import.meta.url));
const seconds = Number(process.env.BENCH_SECONDS ?? 6);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 20);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'grove-bench-proxy-'));
const socketPath = path.join(dir, 'upstream.sock');
const children: ChildProcess[] = [];

function child(role: string): Promise<Record<string, unknown>> {
  const c = spawn(process.execPath, ['--import', 'tsx', path.join(here, 'proxy-targets.ts'), role, socketPath], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(c);
  return new Promise((resolve, reject) => {
    c.once('exit', (code) => reject(new Error(`${role} exited ${code}`)));
    readline.createInterface({ input: c.stdout! }).once('line', (l) => resolve(JSON.parse(l) as Record<string, unknown>));
  });
}

interface Row { target: string; size: string; rps: number; p50: number; p99: number; errors: number }

async function run(target: string, size: string, opts: autocannon.Options): Promise<Row> {
  const r = await autocannon({ connections, duration: seconds, ...opts });
  return { target, size, rps: Math.round(r.requests.average), p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.non2xx };
}

async function main(): Promise<void> {
  await child('upstream');
  const ports = (await child('proxies')) as { httpProxy: number; httpProxy3: number; grove: number };
  const rows: Row[] = [];
  for (const size of ['1k', '256k']) {
    rows.push(await run('direct unix socket', size, { url: `http://localhost/${size}`, socketPath } as autocannon.Options));
    rows.push(await run('http-proxy + keep-alive agent', size, { url: `http://127.0.0.1:${ports.httpProxy}/${size}` }));
    rows.push(await run('http-proxy-3 + keep-alive agent', size, { url: `http://127.0.0.1:${ports.httpProxy3}/${size}` }));
    rows.push(await run('Grove /w/<slug>/ (auth + http-proxy)', size, { url: `http://127.0.0.1:${ports.grove}/w/bench/${size}`, headers: { authorization: 'Bearer bench-token-0123456789' } }));
  }
  const w = Math.max(...rows.map((r) => r.target.length));
  console.log(`\nproxy overhead: ${connections} connections, ${seconds} s each, autocannon, node ${process.version}, ${os.cpus().length} cores\n`);
  console.log(`${'target'.padEnd(w)}  size   req/s    p50 ms  p99 ms  errors`);
  for (const r of rows) console.log(`${r.target.padEnd(w)}  ${r.size.padEnd(5)}  ${String(r.rps).padStart(6)}  ${String(r.p50).padStart(6)}  ${String(r.p99).padStart(6)}  ${r.errors}`);
  const pick = (t: string, s: string) => rows.find((r) => r.target.startsWith(t) && r.size === s)?.rps ?? 0;
  console.log(`\nsummary: 1k http-proxy ${pick('http-proxy +', '1k')} vs http-proxy-3 ${pick('http-proxy-3', '1k')} req/s; Grove front door ${pick('Grove', '1k')} req/s = ${(pick('Grove', '1k') / pick('direct', '1k')).toFixed(2)}x direct`);
}

main()
  .catch((e: unknown) => {
    console.error(e);
    process.exitCode = 1;
  })
  .finally(() => {
    for (const c of children) c.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  });
