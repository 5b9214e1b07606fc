// Test support: a tiny raw-socket HTTP client, as JavaScript source for `node -e`, so the very same client
// runs on the host (against the gate's socket) and inside a sandbox (against the backend's relay on
// 127.0.0.1:3128) with nothing but the Node that is already there. Sends each case's bytes as written
// (no client library normalizes the target first) and returns what came back.
import { spawn } from 'node:child_process';
import type { CorpusCase } from './corpus.ts';
import { TUNNEL_REQUEST, requestText } from './corpus.ts';

/**
 * What docs/security.md promises every process in a sandbox sees, sorted, written out here rather than read from
 * the code under test (the runtime's PROXY_ENV), so a change there fails the tests that check it.
 */
export const PROMISED_ENV = [
  'HTTPS_PROXY=http://127.0.0.1:3128',
  'HTTP_PROXY=http://127.0.0.1:3128',
  'NO_PROXY=localhost,127.0.0.1',
  'http_proxy=http://127.0.0.1:3128',
  'https_proxy=http://127.0.0.1:3128',
  'no_proxy=localhost,127.0.0.1',
];


export interface ProbeCase {
  id: string;
  text: string;
  /** Sent once a tunnel answered 200. */
  tunnel?: string;
  timeoutMs?: number;
}

export interface ProbeResult {
  id: string;
  /** Everything received, latin1. */
  text: string;
  err: string | null;
  ms: number;
}

export type ProbeTarget = { path: string } | { host: string; port: number };

export const PROBE_SOURCE = String.raw`
const net = require('net');
const { target, cases } = JSON.parse(process.argv[1]);
function one(c) {
  return new Promise((resolve) => {
    const s = target.path ? net.connect(target.path) : net.connect(target.port, target.host);
    const chunks = [];
    const t0 = Date.now();
    let sentTunnel = false;
    let done = false;
    const finish = (err) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ id: c.id, text: Buffer.concat(chunks).toString('latin1'), err: err || null, ms: Date.now() - t0 });
    };
    const timer = setTimeout(() => { finish('timeout'); s.destroy(); }, c.timeoutMs || 15000);
    s.on('connect', () => s.write(c.text));
    s.on('data', (d) => {
      chunks.push(d);
      if (!c.tunnel || sentTunnel) return;
      const t = Buffer.concat(chunks).toString('latin1');
      if (/^HTTP\/1\.[01] 200/.test(t) && t.includes('\r\n\r\n')) { sentTunnel = true; s.write(c.tunnel); }
    });
    s.on('error', (e) => finish(e.code || e.message));
    s.on('close', () => finish(null));
  });
}
(async () => {
  const out = [];
  for (const c of cases) out.push(await one(c));
  process.stdout.write(JSON.stringify(out));
})();
`;

export function probeCases(cases: CorpusCase[]): ProbeCase[] {
  return cases.map((c) => ({
    id: c.id,
    text: requestText(c.request),
    ...(c.expect === 'allow' && c.request.kind === 'connect' ? { tunnel: TUNNEL_REQUEST } : {}),
  }));
}

/** The argv for `node -e PROBE_SOURCE <arg>`. */
export function probeArg(target: ProbeTarget, cases: ProbeCase[]): string {
  return JSON.stringify({ target, cases });
}

/** Run the probe with the host's node (against a gate socket). */
export function runProbeOnHost(target: ProbeTarget, cases: ProbeCase[]): Promise<ProbeResult[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', PROBE_SOURCE, probeArg(target, cases)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`probe exited ${code}: ${err}`));
      else resolve(JSON.parse(out) as ProbeResult[]);
    });
  });
}

/** Status code and body of a raw HTTP response (the last response when a tunnel carried a second one). */
export function parseResponse(text: string): { status: number; body: string; responses: Array<{ status: number; head: string; body: string }> } {
  const responses: Array<{ status: number; head: string; body: string }> = [];
  let rest = text;
  while (rest.startsWith('HTTP/')) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) break;
    const head = rest.slice(0, end);
    const status = Number(head.slice(9, 12));
    rest = rest.slice(end + 4);
    const len = /\r\ncontent-length:\s*(\d+)/i.exec(head);
    // A CONNECT 200 has no body: what follows is the tunnelled response.
    if (status === 200 && /Connection Established/i.test(head)) {
      responses.push({ status, head, body: '' });
      continue;
    }
    const body = len ? rest.slice(0, Number(len[1])) : rest;
    responses.push({ status, head, body: dechunk(head, body) });
    rest = rest.slice(body.length);
  }
  const last = responses[responses.length - 1];
  return { status: responses[0]?.status ?? 0, body: last?.body ?? '', responses };
}

function dechunk(head: string, body: string): string {
  if (!/\r\ntransfer-encoding:\s*chunked/i.test(head)) return body;
  let out = '';
  let rest = body;
  for (;;) {
    const nl = rest.indexOf('\r\n');
    if (nl < 0) return out;
    const size = parseInt(rest.slice(0, nl), 16);
    if (!size) return out;
    out += rest.slice(nl + 2, nl + 2 + size);
    rest = rest.slice(nl + 2 + size + 2);
  }
}
