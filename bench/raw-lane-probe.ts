// An experiment, not Grove: how fast a node proxy can be on the users' path when it does one read and one write per
// side and nothing else (no auth, no routing, no header rules; one upstream connection per client connection), beside
// Grove's front door and the backend.sock they both reach, in one run. It bounds what a raw lane in the front door
// could gain, and (the same relay in two cluster workers) what a second front-door process would.
// Run in bench/: BENCH_SECONDS=4 node --import tsx raw-lane-probe.ts
import { spawn, type ChildProcess } from 'node:child_process';
import cluster from 'node:cluster';
import net from 'node:net';
import readline from 'node:readline';
import path from 'node:path';
import autocannon from 'autocannon';
import { TOKEN, cleanup, startServer, waitRunning } from '../e2e/harness.ts';
import { freePort, machineNote, mkTemp, onCleanup, table } from './lib.ts';

const seconds = Number(process.env.BENCH_SECONDS ?? 6);
const rounds = 3;
const home = process.argv[2] === 'probe' ? '' : mkTemp('raw-lane');
const probes: ChildProcess[] = [];

/**
 * The probe: requests are framed by their blank line (GET only, no bodies), the prefix /w/demo is cut, and answers are
 * framed by Content-Length; anything else closes the connection. Enough for GET /status, nothing more.
 */
function rawProxy(socketPath: string, port = 0): Promise<net.Server> {
  const server = net.createServer((client) => {
    client.setNoDelay(true);
    const up = net.connect({ path: socketPath });
    let inBuf = '';
    let outBuf: Buffer = Buffer.alloc(0);
    let remaining = -1;
    client.on('data', (d: Buffer) => {
      inBuf += d.toString('latin1');
      let out = '';
      for (let end = inBuf.indexOf('\r\n\r\n'); end >= 0; end = inBuf.indexOf('\r\n\r\n')) {
        out += inBuf.slice(0, end + 4).replace(' /w/demo/', ' /');
        inBuf = inBuf.slice(end + 4);
      }
      if (out) up.write(out, 'latin1');
    });
    up.on('data', (d: Buffer) => {
      // Passed through as it comes; only counted, so a half answer is never mistaken for a whole one.
      client.write(d);
      outBuf = outBuf.length ? Buffer.concat([outBuf, d]) : d;
      for (;;) {
        if (remaining < 0) {
          const end = outBuf.indexOf('\r\n\r\n');
          if (end < 0) return;
          const m = /\r\ncontent-length: *(\d+)/i.exec(outBuf.toString('latin1', 0, end));
          if (!m) return client.destroy();
          remaining = Number(m[1]);
          outBuf = outBuf.subarray(end + 4);
        }
        if (outBuf.length < remaining) return;
        outBuf = outBuf.subarray(remaining);
        remaining = -1;
      }
    });
    const close = () => {
      client.destroy();
      up.destroy();
    };
    client.on('error', close).on('close', close);
    up.on('error', close).on('close', close);
  });
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)));
}

async function main(): Promise<void> {
  console.log(`raw lane probe: 20 connections, ${seconds} s per target in ${rounds} rounds; ${machineNote()}`);
  const s = await startServer({ home, env: { GROVE_RUNTIME: 'runc' } });
  await waitRunning(s, 'demo');
  const socketPath = path.join(home, 'run', 'demo', 'backend.sock');
  // Its own process, as Grove's server is: autocannon must not share its event loop.
  const startProbe = async (workers: number) => {
    const child = spawn(process.execPath, ['--import', 'tsx', import.meta.filename, 'probe', socketPath, String(workers)], { stdio: ['ignore', 'pipe', 'inherit'] });
    probes.push(child);
    return Number(await new Promise<string>((r) => readline.createInterface({ input: child.stdout! }).once('line', r)));
  };
  const port = await startProbe(1);
  const port2 = await startProbe(2);
  const cells: Array<{ name: string; opts: autocannon.Options; runs: autocannon.Result[] }> = [
    { name: 'backend.sock (runc)', opts: { url: 'http://localhost/status', socketPath } as autocannon.Options, runs: [] },
    { name: 'Grove /w/demo/', opts: { url: `${s.base}/w/demo/status`, headers: { authorization: `Bearer ${TOKEN}` } }, runs: [] },
    { name: 'raw probe, its own process', opts: { url: `http://127.0.0.1:${port}/w/demo/status` }, runs: [] },
    { name: 'raw probe, 2 cluster workers', opts: { url: `http://127.0.0.1:${port2}/w/demo/status` }, runs: [] },
  ];
  for (let r = 0; r < rounds; r++) for (const c of cells) c.runs.push(await autocannon({ connections: 20, duration: seconds / rounds, ...c.opts }));
  const rps = (c: (typeof cells)[number]) => Math.round(c.runs.reduce((a, x) => a + x.requests.total, 0) / c.runs.reduce((a, x) => a + x.duration, 0));
  const direct = rps(cells[0]!);
  table(['target', 'req/s', 'p99 ms (last round)', 'errors', 'ratio to backend.sock'], cells.map((c) => [c.name, rps(c), c.runs.at(-1)?.latency.p99 ?? '-', c.runs.reduce((a, x) => a + x.errors + x.non2xx, 0), (rps(c) / direct).toFixed(2)]));
  console.log(`after: ${machineNote()}`);
  for (const c of probes) c.kill();
  await s.stop();
}

if (process.argv[2] === 'probe' && cluster.isPrimary && Number(process.argv[4] ?? 1) > 1) {
  // The same relay in N worker processes behind node's cluster (the primary accepts and hands each connection to a
  // worker in turn): does a second process pay when autocannon, the backend and the front door share two cores?
  const port = await freePort();
  cluster.setupPrimary({ args: ['probe', process.argv[3] ?? '', '1', String(port)] });
  const ready = Array.from({ length: Number(process.argv[4]) }, () => new Promise((r) => cluster.fork().once('listening', r)));
  await Promise.all(ready);
  console.log(port);
} else if (process.argv[2] === 'probe') {
  const server = await rawProxy(process.argv[3] ?? '', Number(process.argv[5] ?? 0));
  console.log((server.address() as net.AddressInfo).port);
} else {

  const done = onCleanup(() => cleanup(home));
  main()
    .catch((e: unknown) => {
      console.error(e);
      process.exitCode = 1;
    })
    .finally(() => done());
}
