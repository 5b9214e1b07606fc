// Shared helpers for the benchmarks: percentiles, tables, machine notes, docker/git CLI, socket probes, cleanup on exit.
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { sandboxRuntimeSchema } from '@grove/contracts';
import type { SandboxRuntime } from '@grove/contracts';
import { RUNSC_PIDS_FACTOR } from '@grove/sandbox';
import type { RunningServer } from '../e2e/harness.ts';

const run = promisify(execFile);

/** Nearest-rank percentile (p in 0..100) of the values; NaN when there are none. */
export function pct(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i] ?? Number.NaN;
}

export function fmt(n: number, digits = 0): string {
  return Number.isFinite(n) ? n.toFixed(digits) : '-';
}

/** Print an aligned table: first column left-aligned, the rest right-aligned. */
export function table(headers: string[], rows: Array<Array<string | number>>): void {
  const cells = [headers, ...rows.map((r) => r.map(String))];
  const widths = headers.map((_, c) => Math.max(...cells.map((r) => (r[c] ?? '').length)));
  for (const [i, r] of cells.entries()) {
    console.log(r.map((v, c) => (c === 0 ? v.padEnd(widths[c] ?? 0) : v.padStart(widths[c] ?? 0))).join('  '));
    if (i === 0) console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  }
}

/** One line naming the machine and its load, printed before and after each benchmark: the figures depend on it. */
export function machineNote(): string {
  const [l1, l5] = os.loadavg();
  return `node ${process.version}, ${os.cpus().length} cores, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, load ${fmt(l1 ?? 0, 2)}/${fmt(l5 ?? 0, 2)} (1/5 min)${cpuPressure()}`;
}

/** Share of the last minute in which some runnable task waited for a CPU (Linux PSI); the clearest sign of a shared, busy machine. */
function cpuPressure(): string {
  try {
    const m = /some avg10=([\d.]+) avg60=([\d.]+)/.exec(fs.readFileSync('/proc/pressure/cpu', 'utf8'));
    return m ? `, CPU pressure ${m[2]}% (60 s)` : '';
  } catch {
    return '';
  }
}

export function mkTemp(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `grove-bench-${prefix}-`));
}

/** Run a command, return stdout; throws with stderr on failure. */
export async function sh(cmd: string, args: string[], opts: { cwd?: string } = {}): Promise<string> {
  const r = await run(cmd, args, { cwd: opts.cwd, encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 });
  return r.stdout;
}

export const docker = (...args: string[]): Promise<string> => sh('docker', args);
export const gitIn = (cwd: string, ...args: string[]): Promise<string> => sh('git', ['-c', 'safe.directory=*', ...args], { cwd });

/** GET over a Unix socket without keep-alive (like core's health probe); never throws. */
export function getOverSocket(socketPath: string, p: string, timeoutMs = 1_000): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const req = http.request({ socketPath, path: p, agent: false, timeout: timeoutMs, headers: { host: 'bench' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', () => resolve({ status: 0, body: '' }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve({ status: 0, body: '' }));
    req.end();
  });
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Poll fn every intervalMs until it is truthy; throws after timeoutMs. Bounded, like every loop here. */
export async function until<T>(what: string, fn: () => Promise<T | false | null | undefined>, intervalMs: number, timeoutMs = 60_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/** A free loopback port (bound then released; the tiny race is fine for a benchmark). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => (a && typeof a === 'object' ? resolve(a.port) : reject(new Error('no port'))));
    });
  });
}

/** Resident set size of a process in bytes (from /proc), 0 when it is gone. */
export function rssOf(pid: number | undefined): number {
  if (!pid) return 0;
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m?.[1] ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/**
/**
 * SIGTERM to the benchmark's helper processes, then wait until all have exited (at most `graceMs`), so none
 * outlives the run; nginx's master, for one, stops its worker on SIGTERM before it exits itself.
 */
export async function stopChildren(children: readonly ChildProcess[], graceMs = 5_000): Promise<void> {
  for (const c of children) c.kill('SIGTERM');
  const exited = (c: ChildProcess) => (c.exitCode !== null || c.signalCode !== null ? null : new Promise((r) => c.once('exit', r)));
  await Promise.race([Promise.all(children.map(exited)), sleep(graceMs)]);
}

/**
 * Cleanup that runs once, on normal exit and on SIGINT/SIGTERM, so an interrupted benchmark does not
 * leave containers, worktrees or child processes behind.
 */
export function onCleanup(fn: () => Promise<void> | void): () => Promise<void> {
  let done: Promise<void> | null = null;
  const once = (): Promise<void> => (done ??= Promise.resolve().then(fn).catch((e: unknown) => console.error('cleanup failed:', e)));
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      void once().then(() => process.exit(130));
    });
  }
  return once;
}

/** The server's `reconciled` log line (ms, containers), the last one seen. */
export function reconcileLog(s: RunningServer): { ms: number; containers: number } | null {
  for (let i = s.logs.length - 1; i >= 0; i--) {
    try {
      const j = JSON.parse(s.logs[i] ?? '') as { msg?: string; ms?: number; containers?: number };
      if (j.msg === 'reconciled' && typeof j.ms === 'number') return { ms: j.ms, containers: j.containers ?? 0 };
    } catch {
      // not JSON
    }
  }
  return null;
}

export const MiB = 2 ** 20;

/**
 * The sandbox runtimes to measure, each printed beside the other: BENCH_RUNTIMES=runc,runsc (a comma list), default
 * runc plus runsc when the engine lists it (scripts/setup.sh configures it).
 */
export async function benchRuntimes(): Promise<SandboxRuntime[]> {
  const asked = process.env.BENCH_RUNTIMES;
  if (asked) return asked.split(',').map((r) => sandboxRuntimeSchema.parse(r.trim()));
  const listed = JSON.parse(await docker('info', '--format', '{{json .Runtimes}}')) as Record<string, unknown>;
  return 'runsc' in listed ? ['runc', 'runsc'] : ['runc'];
}

/** Host pids limit for a hand-made container on this runtime, as the driver sets it (gVisor's threads count there). */
export function pidsLimitFor(runtime: SandboxRuntime, pids: number): number {
  return runtime === 'runsc' ? pids * RUNSC_PIDS_FACTOR : pids;
}

/** Whether something accepts TCP connections on the loopback port. */
export function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

export interface NginxOptions {
  /** Where its prefix (config, pid, temp dirs) is made; removed with the benchmark's temp dir. */
  dir: string;
  /** The process is pushed here, so the caller's stopChildren stops it. */
  children: ChildProcess[];
  /** The Unix socket it proxies to. */
  upstream: string;
  /** Names the rows in the "not installed" line. */
  name: string;
  /** Pass WebSocket upgrades through (Upgrade and Connection set per request, no upstream keep-alive for them). */
  websocket?: boolean;
}

/**
 * nginx from the Debian package, one worker, keep-alive to the Unix socket, in a temp prefix: the yardstick every
 * proxy benchmark compares Grove with. Buffering stays on (nginx's default) with buffers big enough for 256 KiB,
 * so it never spills to temp files. Null (and a line saying how to install it) when nginx is not installed.
 */
export async function startNginx(o: NginxOptions): Promise<number | null> {
  if (spawnSync('nginx', ['-v']).error) {
    console.log(`nginx not installed (bash scripts/setup.sh --with-bench installs it): skipping its ${o.name} rows`);
    return null;
  }
  const port = await freePort();
  const prefix = fs.mkdtempSync(path.join(o.dir, `nginx-${o.name}-`));
  const conf = path.join(prefix, 'nginx.conf');
  const t = (n: string) => path.join(prefix, `nginx-${n}`);
  // For WebSockets, nginx's documented setup: HTTP/1.1 upstream, Upgrade passed on, Connection from a map.
  const upgrade = o.websocket
    ? `      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_read_timeout 1h;
`
    : `      proxy_set_header Connection "";
`;
  fs.writeFileSync(
    conf,
    `# Generated by bench/lib.ts.
daemon off;
worker_processes 1;
# root, because the socket lives in a 0700 temp dir.
user root;
pid ${t('pid')};
error_log ${t('error.log')} warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${t('body')};
  proxy_temp_path ${t('proxy')};
  fastcgi_temp_path ${t('fastcgi')};
  uwsgi_temp_path ${t('uwsgi')};
  scgi_temp_path ${t('scgi')};
  map $http_upgrade $connection_upgrade { default upgrade; '' ''; }
  upstream grove_backend { server unix:${o.upstream}; keepalive 64; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://grove_backend;
      proxy_http_version 1.1;
${upgrade}      proxy_buffer_size 16k;
      proxy_buffers 32 16k;
      proxy_busy_buffers_size 64k;
    }
  }
}
`,
  );
  o.children.push(spawn('nginx', ['-p', prefix, '-c', conf], { stdio: ['ignore', 'inherit', 'inherit'] }));
  await until('nginx listening', () => portOpen(port), 50, 10_000);
  return port;
}
