// The proxy's lean path for requests without a body: a pooled connection to the backend socket, the request head
// written as one string, and the response framed by a small strict HTTP/1.1 reader, without node's client stack.
import type http from 'node:http';
import { connect, type Socket } from 'node:net';

/** A response head, as the backend sent it (names as sent; the reader refused anything malformed). */
export interface ResponseHead {
  /** HTTP/1.0: the connection is not kept. */
  http10: boolean;
  status: number;
  statusText: string;
  /** [name, value, name, value, …] */
  raw: string[];
}

/** How the body after a head is delimited. */
export type Framing = { kind: 'none' } | { kind: 'length'; length: number } | { kind: 'chunked' } | { kind: 'close' };

/** The reader refused the backend's answer; the connection is dropped. */
export class UpstreamProtocolError extends Error {
  override name = 'UpstreamProtocolError';
}

/** The most a response head may take before the reader gives up on it. */
export const MAX_RESPONSE_HEAD = 64 * 1024;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: ([^\r\n]*))?$/;

/**
 * Parse one response head (status line and header lines, without the final blank line). Strict on purpose: a
 * header that could be framed two ways (folded lines, a bare CR, two lengths that disagree, a transfer coding
 * other than chunked) is refused, so the client never sees a response other than the one the reader framed.
 */
export function parseResponseHead(text: string): ResponseHead {
  const lines = text.split('\r\n');
  const m = STATUS_LINE.exec(lines[0] ?? '');
  if (!m) throw new UpstreamProtocolError(`not an HTTP/1.1 status line: ${JSON.stringify((lines[0] ?? '').slice(0, 80))}`);
  const raw: string[] = [];
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] ?? '';
    const colon = line.indexOf(':');
    const name = colon > 0 ? line.slice(0, colon) : '';
    if (!TOKEN.test(name)) throw new UpstreamProtocolError(`malformed header line: ${JSON.stringify(line.slice(0, 80))}`);
    const value = line.slice(colon + 1).trim();
    if (/[\r\n\0]/.test(value)) throw new UpstreamProtocolError(`header ${name} holds a control character`);
    raw.push(name, value);
  }
  return { http10: m[1] === '0', status: Number(m[2]), statusText: m[3] ?? '', raw };
}

/** How the body of this response to this method is delimited (RFC 9112 6.3). */
export function framingOf(head: ResponseHead, method: string): Framing {
  if (method === 'HEAD' || head.status === 204 || head.status === 304 || head.status < 200) return { kind: 'none' };
  let te: string | null = null;
  let length: number | null = null;
  for (let i = 0; i + 1 < head.raw.length; i += 2) {
    const name = (head.raw[i] ?? '').toLowerCase();
    const value = head.raw[i + 1] ?? '';
    if (name === 'transfer-encoding') {
      if (te !== null) throw new UpstreamProtocolError('more than one Transfer-Encoding header');
      te = value.toLowerCase();
    } else if (name === 'content-length') {
      if (!/^\d{1,15}$/.test(value)) throw new UpstreamProtocolError(`Content-Length ${JSON.stringify(value)} is not a length`);
      const n = Number(value);
      if (length !== null && length !== n) throw new UpstreamProtocolError('two Content-Length headers that disagree');
      length = n;
    }
  }
  if (te !== null) {
    if (te !== 'chunked') throw new UpstreamProtocolError(`Transfer-Encoding ${JSON.stringify(te)} is not supported`);
    if (length !== null) throw new UpstreamProtocolError('both Transfer-Encoding and Content-Length');
    return { kind: 'chunked' };
  }
  return length === null ? { kind: 'close' } : { kind: 'length', length };
}

/**
 * The body of a chunked response, decoded incrementally: `push` takes bytes as they arrive and returns the payload
 * they carry and, once the last chunk and its trailers are through, how many bytes of the input were left over.
 */
export class ChunkedDecoder {
  private state: 'size' | 'data' | 'data-end' | 'trailer' = 'size';
  private line = '';
  private remaining = 0;
  done = false;

  push(buf: Buffer): { payload: Buffer[]; rest: number } {
    const payload: Buffer[] = [];
    let i = 0;
    while (i < buf.length && !this.done) {
      if (this.state === 'data') {
        const n = Math.min(this.remaining, buf.length - i);
        payload.push(buf.subarray(i, i + n));
        i += n;
        this.remaining -= n;
        if (this.remaining === 0) this.state = 'data-end';
        continue;
      }
      // A line: the chunk size, the CRLF after a chunk's data, or a trailer line.
      const nl = buf.indexOf(10, i);
      const end = nl < 0 ? buf.length : nl + 1;
      this.line += buf.toString('latin1', i, end);
      i = end;
      if (this.line.length > 4096) throw new UpstreamProtocolError('a chunk-size or trailer line is too long');
      if (nl < 0) break;
      if (!this.line.endsWith('\r\n')) throw new UpstreamProtocolError('a bare LF in the chunked framing');
      const line = this.line.slice(0, -2);
      this.line = '';
      if (this.state === 'data-end') {
        if (line !== '') throw new UpstreamProtocolError('chunk data longer than its size');
        this.state = 'size';
      } else if (this.state === 'size') {
        const m = /^([0-9a-fA-F]{1,12})(;[^\r\n]*)?$/.exec(line);
        if (!m) throw new UpstreamProtocolError(`malformed chunk size ${JSON.stringify(line.slice(0, 40))}`);
        this.remaining = parseInt(m[1] ?? '', 16);
        this.state = this.remaining === 0 ? 'trailer' : 'data';
      } else if (line === '') {
        this.done = true;
      }
    }
    return { payload, rest: buf.length - i };
  }
}

/**
 * How long a connection to a backend may sit idle in the proxy's pools. Well inside the backend's keep-alive timeout
 * (BACKEND_KEEP_ALIVE_MS in packages/backend, 15 s), so the proxy never writes a request to a connection the
 * backend is closing at that moment: the request would be lost, and one with a body cannot be sent again.
 */
export const UPSTREAM_IDLE_MS = 4_000;
const MAX_IDLE = 64;

/** Where the lean path gets a connection to a backend, and gives it back once an answer left it clean. */
export interface UpstreamSource {
  /** An idle connection, else a new one; `reused` says which. */
  take(): { socket: Socket; reused: boolean };
  /** A new connection, never an idle one (the retry after a reused connection closed under a request). */
  fresh(): Socket;
  give(socket: Socket): void;
}

/** Whatever listens on an idle connection to a backend is removed before the connection is used again. */
function quiet(s: Socket): void {
  parked.delete(s);
  s.setTimeout(0);
  s.removeAllListeners('timeout');
  s.removeAllListeners('close');
  s.removeAllListeners('error');
  s.removeAllListeners('data');
  s.removeAllListeners('end');
}

/** Who hears of an idle connection's retirement (its pool or its holder). */
const parked = new WeakMap<Socket, () => void>();

/** An idle connection's listener for all it may hear (`this` is the connection): whatever it is, the connection goes. */
function retire(this: Socket): void {
  const dropped = parked.get(this);
  parked.delete(this);
  dropped?.();
  this.destroy();
}

/**
 * Idle, a connection is retired by anything from the backend (bytes past the response, an end) and after `idleMs`;
 * `dropped` hears of it. One module-level listener rather than a closure per connection: this runs per request.
 */
function park(s: Socket, idleMs: number, dropped: () => void): void {
  s.removeAllListeners('data');
  s.removeAllListeners('end');
  s.removeAllListeners('error');
  s.removeAllListeners('close');
  parked.set(s, dropped);
  s.on('data', retire);
  s.on('end', retire);
  s.on('error', retire);
  s.on('close', retire);
  s.on('timeout', retire);
  s.setTimeout(idleMs);
}

/**
 * The one connection to a backend that one client connection of the front door's fast lane keeps (its requests come
 * one at a time): no pool to share, and the socket's check (`verify`, which throws) runs when a connection is opened.
 * A connection opened to the socket that was checked goes on reaching that backend, whatever is at the path later.
 */
export class HeldUpstream implements UpstreamSource {
  private idle: Socket | null = null;

  constructor(
    readonly socketPath: string,
    private readonly verify: () => unknown,
    private readonly idleMs = UPSTREAM_IDLE_MS,
  ) {}

  take(): { socket: Socket; reused: boolean } {
    const s = this.idle;
    this.idle = null;
    if (s && !s.destroyed && s.writable) {
      quiet(s);
      s.resume();
      return { socket: s, reused: true };
    }
    return { socket: this.fresh(), reused: false };
  }

  fresh(): Socket {
    this.verify();
    return connect({ path: this.socketPath });
  }

  give(s: Socket): void {
    if (s.destroyed) return;
    this.idle?.destroy();
    this.idle = s;
    park(s, this.idleMs, () => {
      if (this.idle === s) this.idle = null;
    });
  }

  /** The client's connection is done with it (closed, or given to node's server). */
  release(): void {
    this.idle?.destroy();
    this.idle = null;
  }
}

/**
 * Kept-alive connections to one backend socket, tied to the socket they were made for (its identity key): when
 * the file at the path is another socket, the idle ones are dropped, never reused.
 */
export class UpstreamPool {
  private key: string | null = null;
  private readonly idle: Socket[] = [];

  constructor(
    private readonly socketPath: string,
    private readonly idleMs = UPSTREAM_IDLE_MS,
  ) {}

  /** An idle connection to the socket named by `key`, else a new one; `reused` says which. */
  take(key: string): { socket: Socket; reused: boolean } {
    if (this.key !== key) {
      this.drain();
      this.key = key;
    }
    for (let s = this.idle.pop(); s; s = this.idle.pop()) {
      if (s.destroyed || !s.writable) continue;
      quiet(s);
      // Paused when its last response waited for a slow client.
      s.resume();
      return { socket: s, reused: true };
    }
    return { socket: this.fresh(), reused: false };
  }

  /** A new connection, never an idle one (the retry after a reused connection closed under a request). */
  fresh(): Socket {
    return connect({ path: this.socketPath });
  }

  /** Back to the pool after a response that left the connection clean. */
  give(key: string, s: Socket): void {
    if (key !== this.key || this.idle.length >= MAX_IDLE || s.destroyed) {
      s.destroy();
      return;
    }
    park(s, this.idleMs, () => {
      const i = this.idle.indexOf(s);
      if (i >= 0) this.idle.splice(i, 1);
    });
    this.idle.push(s);
  }

  drain(): void {
    for (const s of this.idle.splice(0)) s.destroy();
  }
}

/** Hop-by-hop headers (RFC 9110 7.6.1): they describe one connection, never the next one. */
export const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/** A start line and [name, value, …] pairs as one head; names and values come from node's parser or from Grove itself. */
export function headText(startLine: string, pairs: readonly string[]): string {
  let text = `${startLine}\r\n`;
  for (let i = 0; i + 1 < pairs.length; i += 2) text += `${pairs[i]}: ${pairs[i + 1]}\r\n`;
  return `${text}\r\n`;
}

/** The request line and headers as one string (see headText). */
export function requestHead(method: string, path: string, headers: http.OutgoingHttpHeaders): string {
  const pairs: string[] = [];
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined) continue;
    for (const one of Array.isArray(v) ? v : [v]) pairs.push(k, String(one));
  }
  return headText(`${method} ${path} HTTP/1.1`, pairs);
}
