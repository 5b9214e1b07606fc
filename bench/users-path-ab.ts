// A/B of the users' path while working on the front door: one real server per checkout (dashboard mounted unless
// `<root>:noweb`, SQLite, the demo backend on runc), GET /w/demo/status through the front door and straight to its
// backend.sock, round-robin in one run, with the server's own CPU per request (user + sys from /proc), which a
// loaded machine moves less than req/s. Relative figures only; bench/proxy.ts is the benchmark of record.
// Run in bench/: ROOTS=/path/to/before,/path/to/after [PROF=1] [SECS=6] npx tsx users-path-ab.ts
// PROF=1 writes a CPU profile of each server's load phase to /tmp/grove-users-path-prof/<i>/ (profile-preload.mjs).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import autocannon from 'autocannon';
import { TOKEN, cleanup } from '../e2e/harness.ts';
import { onCleanup } from './lib.ts';

/** The server of `root` (its own main.ts), started as e2e/harness.ts starts one. */
async function startAt(root: string, home: string, env: Record<string, string>) {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'apps/server/src/main.ts')], {
    cwd: root,
    env: { ...process.env, GROVE_HOME: home, GROVE_PORT: '0', GROVE_PREVIEW_PORT: '0', GROVE_TOKEN: TOKEN, GROVE_MAX_RUNNING: '4', GROVE_WARM_POOL: '0', DATABASE_URL: '', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let buf = '';
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout?.on('data', (d: Buffer) => {
      buf += d.toString();
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        try {
          const j = JSON.parse(line) as { msg?: string; port?: number };
          if (j.msg === 'grove.listening' && j.port) resolve(j.port);
        } catch {
          // not a log line
        }
      }
    });
    child.once('exit', (code) => reject(new Error(`server exited ${code}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return { base, home, child, stop: async () => { child.kill('SIGTERM'); await exited; } };
}
async function waitRunningAt(base: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const r = await fetch(`${base}/api/workspaces/demo`, { headers: { authorization: `Bearer ${TOKEN}` } });
    if (r.status === 200 && ((await r.json()) as { workspace: { state: string } }).workspace.state === 'running') return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('demo never running');
}

const roots = (process.env.ROOTS ?? path.resolve(import.meta.dirname, '..')).split(',');
const seconds = Number(process.env.SECS ?? 4);
const rounds = Number(process.env.ROUNDS ?? 3);
const connections = Number(process.env.CONN ?? 20);
const reqPath = process.env.REQ_PATH ?? '/status';

const started: Array<{ s: Awaited<ReturnType<typeof startAt>> }> = [];
const cells: Array<{ name: string; pid?: number | undefined; cpu?: [number, number]; opts: autocannon.Options; runs: autocannon.Result[] }> = [];
/** utime+stime of a process, in clock ticks (1/100 s). */
const cpuOf = (pid: number) => { const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? []; return [Number(f[11]), Number(f[12])] as const; };
// Servers stopped, their containers and homes removed, also on Ctrl-C.
const done = onCleanup(async () => {
  for (const { s } of started) {
    await s.stop().catch(() => undefined);
    cleanup(s.home);
  }
});
try {
  for (const [i, spec] of roots.entries()) {
    const [root = '', flag] = spec.split(':');
    const home = fs.mkdtempSync(path.join(os.tmpdir(), `grove-prof-${i}-`));
    const env: Record<string, string> = { GROVE_RUNTIME: 'runc', GROVE_WEB_DIR: flag === 'noweb' ? path.join(home, 'no-web') : path.join(root, 'apps/web'), LOG_LEVEL: process.env.LOG_LEVEL ?? 'info' };
    if (process.env.PROF) Object.assign(env, { NODE_OPTIONS: `--import ${path.join(import.meta.dirname, 'profile-preload.mjs')}`, PROF_DIR: `/tmp/grove-users-path-prof/${i}` });
    const s = await startAt(root, home, env);
    started.push({ s });
    await waitRunningAt(s.base);
    const label = `${i}:${path.basename(root)}${flag ? `:${flag}` : ''}`;
    cells.push({ name: `${label} backend.sock`, opts: { url: `http://localhost${reqPath}`, socketPath: path.join(home, 'run/demo/backend.sock') } as autocannon.Options, runs: [] });
    cells.push({ name: `${label} front door`, pid: s.child.pid, opts: { url: `${s.base}/w/demo${reqPath}`, headers: { authorization: `Bearer ${TOKEN}` } }, runs: [] });
  }
  // Untimed warm-up of each cell (JIT, pools).
  for (const c of cells) await autocannon({ connections, duration: 1, ...c.opts });
  if (process.env.PROF) for (const { s } of started) if (s.child.pid) process.kill(s.child.pid, 'SIGUSR2');
  for (let r = 0; r < rounds; r++)
    for (const c of cells) {
      const before = c.pid ? cpuOf(c.pid) : [0, 0];
      c.runs.push(await autocannon({ connections, duration: seconds / rounds, ...c.opts }));
      if (c.pid) {
        const after = cpuOf(c.pid);
        c.cpu = [(c.cpu?.[0] ?? 0) + after[0] - (before[0] ?? 0), (c.cpu?.[1] ?? 0) + after[1] - (before[1] ?? 0)];
      }
    }
  for (const c of cells) {
    const total = c.runs.reduce((a, r) => a + r.requests.total, 0);
    const secs = c.runs.reduce((a, r) => a + r.duration, 0);
    const errs = c.runs.reduce((a, r) => a + r.errors + r.non2xx, 0);
    console.log(`${c.name.padEnd(40)} ${String(Math.round(total / secs)).padStart(7)} req/s  p99 ${c.runs.map((r) => r.latency.p99).join('/')} ms  errors ${errs}${c.cpu !== undefined ? `  server CPU user ${Math.round((c.cpu[0] * 10_000) / total)} + sys ${Math.round((c.cpu[1] * 10_000) / total)} µs/req` : ''}`);
  }
} finally {
  await done();
}
