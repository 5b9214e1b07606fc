// Preview: /preview/<port>/… on the backend's socket reaches a server the agent started inside this container
// (a dev server on 3000 or 5173, say), HTTP and WebSocket alike. The container has no network, so the only
// thing reachable is its own loopback; only ports on the allowlist are, and never the backend's own.
import { request } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { readFile } from 'node:fs/promises';
import { GroveError, isGroveError } from '@grove/contracts';
import type { ListeningPort } from '@grove/contracts';
import { sendError } from './http.ts';
import type { Logger } from './logger.ts';

export interface PortRange {
  from: number;
  to: number;
}

/** The default allowlist: every unprivileged port (the backend's own are taken out separately). */
export const DEFAULT_PREVIEW_PORTS: readonly PortRange[] = [{ from: 1024, to: 65535 }];

/** "1024-65535" or "3000,5173,8000-8099" → ranges; GroveError(invalid_input) naming what is wrong. */
export function parsePortRanges(spec: string): PortRange[] {
  const ranges: PortRange[] = [];
  for (const part of spec.split(',').map((p) => p.trim())) {
    const m = /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(part);
    const from = Number(m?.[1]);
    const to = m?.[2] === undefined ? from : Number(m[2]);
    if (!m || from < 1 || to > 65535 || from > to) {
      throw new GroveError('invalid_input', `invalid port range "${part}": expected <port> or <from>-<to> within 1-65535`);
    }
    ranges.push({ from, to });
  }
  return ranges;
}

const PREVIEW_PATH = /^\/preview\/([^/?#]*)(\/[^?#]*)?(\?[^#]*)?$/;

/** Headers that describe one hop, not the message (RFC 9110 section 7.6.1), plus the ones this hop sets. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

export interface PreviewOptions {
  allow: readonly PortRange[];
  /** The backend's own TCP ports (the egress relay): never reachable, whatever the allowlist says. */
  reserved: ReadonlySet<number>;
  slug: string;
  logger: Logger;
  /** Bound on connecting to the port inside the container. Default 5 s. */
  connectTimeoutMs?: number;
}

export interface Preview {
  /** True when the request path is a preview path (/preview or /preview/…). */
  matches(url: string): boolean;
  handle(req: IncomingMessage, res: ServerResponse): void;
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  isAllowed(port: number): boolean;
  /** Cut every open preview connection. */
  close(): void;
}

interface Target {
  port: number;
  /** The path the dev server sees: the rest after /preview/<port>, with the query. */
  path: string;
  /** The public path of this preview, for rewriting absolute redirects. */
  prefix: string;
}

export function createPreview(opts: PreviewOptions): Preview {
  const { logger } = opts;
  const connectTimeoutMs = opts.connectTimeoutMs ?? 5_000;
  const open = new Set<Socket | Duplex>();
  const track = (s: Socket | Duplex): void => {
    open.add(s);
    s.once('close', () => open.delete(s));
  };

  const isAllowed = (port: number): boolean => !opts.reserved.has(port) && opts.allow.some((r) => port >= r.from && port <= r.to);

  /** The port and forwarded path; a redirect location when the path lacks the slash after the port. */
  const target = (req: IncomingMessage): Target | { redirect: string } => {
    const m = PREVIEW_PATH.exec(req.url ?? '/');
    const raw = m?.[1] ?? '';
    if (!m || !/^[1-9][0-9]{0,4}$/.test(raw) || Number(raw) > 65535) {
      throw new GroveError('invalid_input', `"${raw}" is not a port: preview URLs are /preview/<port>/ with a port between 1 and 65535`);
    }
    const port = Number(raw);
    if (!isAllowed(port)) {
      const why = opts.reserved.has(port) ? 'it is one of the backend\'s own ports' : `previews are allowed on ${opts.allow.map((r) => (r.from === r.to ? `${r.from}` : `${r.from}-${r.to}`)).join(', ')}`;
      throw new GroveError('port_not_allowed', `port ${port} cannot be previewed: ${why}`, { details: { port } });
    }
    // Relative, so it resolves under whatever prefix the front door mounted us at (/w/<slug>/preview/<port>).
    if (m[2] === undefined) return { redirect: `${port}/${m[3] ?? ''}` };
    return { port, path: `${m[2]}${m[3] ?? ''}`, prefix: publicPrefix(req.headers, port) };
  };

  /** 127.0.0.1 first, then ::1: dev servers that bind "localhost" often end up on the IPv6 loopback only. */
  const dial = async (port: number): Promise<Socket> => {
    let last: unknown;
    for (const host of ['127.0.0.1', '::1']) {
      try {
        return await connectOnce(host, port, connectTimeoutMs);
      } catch (err) {
        last = err;
        if ((err as NodeJS.ErrnoException).code !== 'ECONNREFUSED' && (err as NodeJS.ErrnoException).code !== 'EADDRNOTAVAIL') break;
      }
    }
    const code = (last as NodeJS.ErrnoException | undefined)?.code ?? (last instanceof Error ? last.message : 'no answer');
    throw new GroveError(
      'preview_unreachable',
      `nothing answers on port ${port} inside workspace ${opts.slug} (${code}); start the server there, listening on 127.0.0.1 or 0.0.0.0`,
      { details: { port } },
    );
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const t = target(req);
    if ('redirect' in t) {
      res.writeHead(308, { location: t.redirect, 'content-length': 0 });
      res.end();
      return;
    }
    const socket = await dial(t.port);
    track(socket);
    const upstream = request({ method: req.method, path: t.path, headers: forwardHeaders(req.headers, t.prefix), createConnection: () => socket });
    upstream.on('response', (up) => {
      res.writeHead(up.statusCode ?? 502, up.statusMessage, responseHeaders(up.headers, t.prefix));
      up.pipe(res);
      up.on('error', () => res.destroy());
    });
    upstream.on('error', (err) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      sendError({ req, res, err: new GroveError('preview_unreachable', `the server on port ${t.port} dropped the request (${(err as NodeJS.ErrnoException).code ?? err.message})`), logger });
    });
    // A client that goes away mid-response takes the upstream request with it.
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
      socket.destroy();
    });
    req.pipe(upstream);
  };

  const upgrade = async (req: IncomingMessage, client: Duplex, head: Buffer): Promise<void> => {
    const t = target(req);
    if ('redirect' in t) throw new GroveError('invalid_input', 'a WebSocket preview URL needs the path after the port, e.g. /preview/5173/');
    const socket = await dial(t.port);
    track(socket);
    track(client);
    // Replayed as received, so the dev server does the handshake itself (its own subprotocols and extensions).
    const lines = [`${req.method ?? 'GET'} ${t.path} HTTP/1.1`];
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i] ?? '';
      if (isCredential(name) || name.toLowerCase() === 'cookie') continue;
      lines.push(`${name}: ${req.rawHeaders[i + 1] ?? ''}`);
    }
    const cookie = stripGroveCookie(req.headers.cookie);
    if (cookie) lines.push(`Cookie: ${cookie}`);
    // One byte per char, as node read them: a header sent in UTF-8 reaches the dev server as its bytes.
    socket.write(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
    if (head.length) socket.write(head);
    socket.pipe(client);
    client.pipe(socket);
    const end = (): void => {
      socket.destroy();
      client.destroy();
    };
    socket.once('error', end);
    client.once('error', end);
    socket.once('close', end);
    client.once('close', end);
  };

  return {
    matches: (url) => url === '/preview' || url.startsWith('/preview/') || url.startsWith('/preview?'),
    handle(req, res) {
      handle(req, res).catch((err: unknown) => sendError({ req, res, err, logger }));
    },
    upgrade(req, socket, head) {
      upgrade(req, socket, head).catch((err: unknown) => refuseUpgrade(socket, err, logger));
    },
    isAllowed,
    close() {
      for (const s of open) s.destroy();
      open.clear();
    },
  };
}

function connectOnce(host: string, port: number, timeoutMs: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ host, port });
    s.setTimeout(timeoutMs, () => s.destroy(Object.assign(new Error(`no connection within ${timeoutMs} ms`), { code: 'ETIMEDOUT' })));
    s.once('connect', () => {
      s.setTimeout(0);
      resolve(s);
    });
    s.once('error', reject);
  });
}

/**
 * The public path of port's preview, from the front door's mount point when it said so: /w/<slug> (the
 * dashboard's listener) → /w/<slug>/preview/<port>; /pv/<cap>/<slug> (the preview listener) → /pv/<cap>/<slug>/<port>.
 * Checked so it cannot inject a header or a URL; anything else is ignored.
 */
function publicPrefix(headers: IncomingHttpHeaders, port: number): string {
  const v = headers['x-forwarded-prefix'];
  if (typeof v === 'string' && /^\/w\/[a-z0-9][a-z0-9~-]{0,80}$/.test(v)) return `${v}/preview/${port}`;
  if (typeof v === 'string' && /^\/pv\/[A-Za-z0-9_-]{43}\/[a-z0-9][a-z0-9~-]{0,80}$/.test(v)) return `${v}/${port}`;
  return `/preview/${port}`;
}

function isCredential(name: string): boolean {
  const n = name.toLowerCase();
  return n === 'authorization' || n === 'proxy-authorization';
}

/** Grove's own token cookie never reaches a server in the sandbox; the app's cookies do. */
function stripGroveCookie(cookie: string | undefined): string | undefined {
  if (!cookie) return undefined;
  const kept = cookie
    .split(';')
    .map((c) => c.trim())
    .filter((c) => c && !c.startsWith('grove_token='));
  return kept.length ? kept.join('; ') : undefined;
}

/** What the dev server receives: no hop-by-hop headers, no Grove credentials, and where it is mounted. */
function forwardHeaders(headers: IncomingHttpHeaders, prefix: string): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const [k, v] of Object.entries(headers)) {
    if (HOP_BY_HOP.has(k) || isCredential(k) || k === 'cookie') continue;
    out[k] = v;
  }
  const cookie = stripGroveCookie(headers.cookie);
  if (cookie) out.cookie = cookie;
  // Apps that build absolute URLs can honour this (the path the browser sees, without the trailing slash).
  out['x-forwarded-prefix'] = prefix;
  return out;
}

/** Hop-by-hop headers dropped; an absolute-path redirect ("/login") kept inside the preview. */
function responseHeaders(headers: IncomingHttpHeaders, prefix: string): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const [k, v] of Object.entries(headers)) if (!HOP_BY_HOP.has(k)) out[k] = v;
  const loc = out.location;
  if (typeof loc === 'string' && loc.startsWith('/') && !loc.startsWith('//')) out.location = `${prefix}${loc}`;
  return out;
}

function refuseUpgrade(socket: Duplex, err: unknown, logger: Logger): void {
  const e = isGroveError(err) ? err : new GroveError('internal', 'internal error; see the backend log');
  if (!isGroveError(err)) logger.error({ err }, 'preview upgrade failed');
  const body = JSON.stringify(e.toBody());
  socket.end(`HTTP/1.1 ${e.status} ${e.code}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
}

// ---- listening ports (/proc/net/tcp and tcp6) ----

const TCP_LISTEN = '0A';

/** "0100007F" (a little-endian 32-bit word per 4 bytes, as the kernel prints it) → "127.0.0.1" or an IPv6 text. */
function hexAddress(hex: string): string {
  const bytes: number[] = [];
  for (let w = 0; w < hex.length; w += 8) {
    const word = hex.slice(w, w + 8);
    for (let b = 6; b >= 0; b -= 2) bytes.push(Number.parseInt(word.slice(b, b + 2), 16));
  }
  if (bytes.length === 4) return bytes.join('.');
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((((bytes[i] ?? 0) << 8) | (bytes[i + 1] ?? 0)).toString(16));
  // Compress the longest run of zero groups, as in RFC 5952.
  let best = { at: -1, len: 0 };
  for (let i = 0; i < 8; ) {
    if (groups[i] !== '0') {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === '0') j++;
    if (j - i > best.len && j - i > 1) best = { at: i, len: j - i };
    i = j;
  }
  if (best.at < 0) return groups.join(':');
  return `${groups.slice(0, best.at).join(':')}::${groups.slice(best.at + best.len).join(':')}`;
}

/** Parse one /proc/net/tcp{,6} table into listening (address, port) pairs. */
export function parseProcNetTcp(text: string): Array<{ address: string; port: number }> {
  const out: Array<{ address: string; port: number }> = [];
  for (const line of text.split('\n').slice(1)) {
    const cols = line.trim().split(/\s+/);
    const local = cols[1];
    if (!local || cols[3] !== TCP_LISTEN) continue;
    const [addr, port] = local.split(':');
    if (!addr || !port || !/^[0-9A-F]+$/i.test(addr) || (addr.length !== 8 && addr.length !== 32)) continue;
    out.push({ address: hexAddress(addr.toUpperCase()), port: Number.parseInt(port, 16) });
  }
  return out;
}

/** Listening TCP ports of this network namespace (the container's), with whether /preview may reach each. */
export async function listeningPorts(preview: Pick<Preview, 'isAllowed'>, procNet = '/proc/net'): Promise<ListeningPort[]> {
  const byPort = new Map<number, Set<string>>();
  for (const table of ['tcp', 'tcp6']) {
    let text: string;
    try {
      text = await readFile(`${procNet}/${table}`, 'utf8');
    } catch {
      continue; // no IPv6 in this kernel, say
    }
    for (const { address, port } of parseProcNetTcp(text)) {
      const set = byPort.get(port) ?? new Set<string>();
      set.add(address);
      byPort.set(port, set);
    }
  }
  return [...byPort.entries()]
    .sort(([a], [b]) => a - b)
    .map(([port, addresses]) => ({ port, addresses: [...addresses].sort(), preview: preview.isAllowed(port) }));
}
