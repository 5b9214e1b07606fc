// The front door's fast lane: a body-less GET or HEAD under /w/<slug>/ whose whole head arrived at once is parsed
// here, strictly, and answered without node's request and response objects; every other request, and everything
// after it on that connection, goes to node's HTTP server exactly as it arrived. The lane decides nothing of its
// own: auth, routing and the backend's answer go through the same functions as on node's path (server.ts, proxy.ts).
import type http from 'node:http';
import type { Socket } from 'node:net';

/** A request the lane took: what the server's handlers read of an IncomingMessage. */
export interface LaneRequest {
  method: 'GET' | 'HEAD';
  url: string;
  headers: http.IncomingHttpHeaders;
  socket: Socket;
  /** Connection: close: the connection ends after this answer. */
  close: boolean;
  /** What the client's connection keeps across its requests (the proxy's connection to the backend). */
  conn: LaneConnection;
}

/** Per client connection: what the handler keeps between requests, released when the lane lets go of the connection. */
export interface LaneConnection {
  held: { release(): void } | null;
}

/**
 * Serve one lane request. Resolve `false` (before writing anything) to hand the request to node's server instead:
 * the lane then replays its bytes there, so whatever node's path answers (401, 404, a redirect) is the answer.
 */
export type LaneHandler = (req: LaneRequest, res: LaneResponse) => Promise<boolean>;

/** Node's limit on a request head; a longer one goes to node, which refuses it with 431. */
const MAX_HEAD = 16 * 1024;
/** Pipelined bytes the lane holds while it answers, before it stops reading. */
const MAX_BUFFERED = 64 * 1024;
/** GET or HEAD of a path under /w/ over HTTP/1.1, then header lines: a token, a colon, a value node would take. */
const HEAD_SHAPE = /^(GET|HEAD) (\/w\/[\x21-\x7e]*) HTTP\/1\.1((?:\r\n[!#$%&'*+.^_`|~0-9A-Za-z-]+:[\t\x20-\x7e\x80-\xff]*)*)$/;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** A header value node would take: no control character but tab, no DEL. */
const VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/**
 * Headers that change how the request is framed or what the connection becomes: a request carrying any of them is
 * node's to parse, never the lane's, so no two parsers ever read one request two ways.
 */
const NOT_FOR_THE_LANE = new Set(['content-length', 'transfer-encoding', 'upgrade', 'expect', 'te', 'trailer', 'http2-settings', 'proxy-connection', 'keep-alive']);

/**
 * The request head (without its blank line) as the lane's request, or null when it is not the lane's to answer:
 * not GET or HEAD under /w/, not HTTP/1.1, any header twice, a header node could read another way, a body.
 */
export function parseLaneHead(text: string, socket: Socket, conn: LaneConnection = { held: null }): LaneRequest | null {
  if (text.length > MAX_HEAD) return null;
  // The whole head in one test (request line, then name:value lines of the characters node takes), so the lines
  // below are only cut, never judged one by one.
  const m = HEAD_SHAPE.exec(text);
  if (!m) return null;
  const headers: Record<string, string> = {};
  const block = m[3] ?? '';
  for (let at = 2; at < block.length; ) {
    const eol = block.indexOf('\r\n', at);
    const end = eol < 0 ? block.length : eol;
    const colon = block.indexOf(':', at);
    const key = block.slice(at, colon).toLowerCase();
    // Optional whitespace around the value is a space or a tab only, as node's parser reads it.
    let from = colon + 1;
    let to = end;
    while (from < to && (block.charCodeAt(from) === 32 || block.charCodeAt(from) === 9)) from++;
    while (to > from && (block.charCodeAt(to - 1) === 32 || block.charCodeAt(to - 1) === 9)) to--;
    const value = block.slice(from, to);
    // (A lookup, not `in`: on this per-request path `in` cost more than the whole head's regular expression.)
    if (headers[key] !== undefined || NOT_FOR_THE_LANE.has(key)) return null;
    if (key === 'connection' && !/^(keep-alive|close)$/i.test(value)) return null;
    headers[key] = value;
    at = end + 2;
  }
  if (headers.host === undefined) return null;
  return { method: m[1] as 'GET' | 'HEAD', url: m[2] ?? '/', headers, socket, close: /^close$/i.test(headers.connection ?? ''), conn };
}

let dateCache = { second: -1, text: '' };
/** The Date header node sends, made once a second. */
function httpDate(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== dateCache.second) dateCache = { second, text: new Date(now).toUTCString() };
  return dateCache.text;
}

/** The front door's own headers on every answer (server.ts sets them on node's path), unless the answer has its own. */
const FRONT_DOOR_HEADERS: ReadonlyArray<readonly [string, string]> = [
  ['x-frame-options', 'DENY'],
  ['content-security-policy', "frame-ancestors 'none'"],
];

/**
 * The part of ServerResponse that proxy.ts and errors.ts use, written straight to the client's socket: the head as
 * node would frame it (Date, keep-alive, chunked when the answer has no length), the body as given.
 */
export class LaneResponse {
  headersSent = false;
  writableFinished = false;
  destroyed = false;
  private chunked = false;
  /** The head, from writeHead until the first write. */
  private head: string | null = null;
  private bodyless: boolean;
  private readonly closeListeners: Array<() => void> = [];

  constructor(
    private readonly socket: Socket,
    method: string,
    private readonly onFinish: () => void,
    private readonly keepAliveSeconds: number,
    private readonly close = false,
  ) {
    this.bodyless = method === 'HEAD';
  }

  writeHead(status: number, reasonOrHeaders?: string | http.OutgoingHttpHeaders | string[], maybeHeaders?: http.OutgoingHttpHeaders | string[]): this {
    if (this.headersSent) throw new Error('the head was already written');
    const reason = typeof reasonOrHeaders === 'string' ? reasonOrHeaders : '';
    const given = typeof reasonOrHeaders === 'string' ? maybeHeaders : reasonOrHeaders;
    const pairs: string[] = [];
    if (Array.isArray(given)) pairs.push(...given);
    else for (const [k, v] of Object.entries(given ?? {})) if (v !== undefined) for (const one of Array.isArray(v) ? v : [v]) pairs.push(k, String(one));
    const names = new Set<string>();
    for (let i = 0; i < pairs.length; i += 2) {
      const name = pairs[i] ?? '';
      // What node's writeHead refuses, refused alike (proxy.ts then answers 502 instead of passing it on).
      if (!TOKEN.test(name) || !VALUE.test(pairs[i + 1] ?? '')) throw new TypeError(`invalid header ${JSON.stringify(name)} in the answer`);
      names.add(name.toLowerCase());
    }
    for (const [k, v] of FRONT_DOOR_HEADERS) if (!names.has(k)) pairs.push(k, v);
    if (status === 204 || status === 304 || status < 200) this.bodyless = true;
    this.chunked = !this.bodyless && !names.has('content-length');
    let head = `HTTP/1.1 ${status} ${reason || 'OK'}\r\n`;
    for (let i = 0; i + 1 < pairs.length; i += 2) head += `${pairs[i]}: ${pairs[i + 1]}\r\n`;
    // Node adds a Date only when the answer has none (a backend's own passes through), and always its keep-alive.
    if (!names.has('date')) head += `Date: ${httpDate()}\r\n`;
    head += this.close ? 'Connection: close\r\n' : `Connection: keep-alive\r\nKeep-Alive: timeout=${this.keepAliveSeconds}\r\n`;
    if (this.chunked) head += 'Transfer-Encoding: chunked\r\n';
    this.headersSent = true;
    // Sent with the first bytes of the body or the end, as node's ServerResponse does: one write for a small answer.
    this.head = `${head}\r\n`;
    return this;
  }

  /** The head, if it still waits, then `parts`, as one write to the socket (a writev when there are several). */
  private send(parts: ReadonlyArray<Buffer | string>): boolean {
    const head = this.head;
    this.head = null;
    const n = (head === null ? 0 : 1) + parts.length;
    if (n === 0) return true;
    if (n > 1) this.socket.cork();
    let ok = true;
    if (head !== null) ok = this.socket.write(head, 'latin1');
    for (const p of parts) ok = typeof p === 'string' ? this.socket.write(p, 'latin1') : this.socket.write(p);
    if (n > 1) this.socket.uncork();
    return ok;
  }

  /** The body's bytes framed as the head said: as they are, or as one chunk. */
  private framed(b: Buffer): Array<Buffer | string> {
    if (this.bodyless || b.length === 0) return [];
    return this.chunked ? [`${b.length.toString(16)}\r\n`, b, '\r\n'] : [b];
  }

  write(chunk: Buffer | string): boolean {
    if (!this.headersSent) this.writeHead(200);
    const parts = this.framed(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    // Nothing to send yet: the head waits for the body or the end.
    if (parts.length === 0) return true;
    return this.send(parts);
  }

  end(last?: Buffer | string): this {
    if (this.writableFinished || this.destroyed) return this;
    if (!this.headersSent) this.writeHead(200);
    const parts = last === undefined ? [] : this.framed(typeof last === 'string' ? Buffer.from(last) : last);
    if (this.chunked && !this.bodyless) parts.push('0\r\n\r\n');
    this.send(parts);
    this.writableFinished = true;
    this.onFinish();
    return this;
  }

  /** `close` is all proxy.ts listens for here (the client went away before the answer ended); `drain` is the socket's. */
  on(event: 'close', fn: () => void): this {
    if (event === 'close') this.closeListeners.push(fn);
    return this;
  }

  once(event: 'drain', fn: () => void): this {
    this.socket.once(event, fn);
    return this;
  }

  /** The client's connection closed: tell whoever waits on this answer. */
  clientGone(): void {
    if (this.writableFinished) return;
    this.destroyed = true;
    for (const fn of this.closeListeners.splice(0)) fn();
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.socket.destroy();
    for (const fn of this.closeListeners.splice(0)) fn();
  }

  // The error path sets headers before writing (server.ts on node's path); the lane's answers carry them anyway.
  setHeader(): this {
    return this;
  }
}

export interface LaneOptions {
  /** node's own 'connection' listener of the HTTP server, which gets the connection when the lane lets go of it. */
  handOff: (socket: Socket) => void;
  serve: LaneHandler;
  /** How long a connection may sit idle between requests (the HTTP server's keepAliveTimeout). */
  keepAliveMs: number;
  onError: (err: unknown) => void;
}

export interface Lane {
  /** Take a new client connection. */
  accept(socket: Socket): void;
  /** Stop taking requests: idle connections close now, busy ones after their answer. */
  close(): void;
  /** Requests the lane answered, and connections it gave to node (tests, and the benchmark's check that it ran). */
  readonly stats: { served: number; handedOff: number };
}

export function createLane(o: LaneOptions): Lane {
  const open = new Map<Socket, { idle: boolean }>();
  let closing = false;
  const stats = { served: 0, handedOff: 0 };
  const keepAliveSeconds = Math.max(1, Math.floor(o.keepAliveMs / 1000));

  const accept = (socket: Socket): void => {
    /** Bytes read and not yet answered: the next request's head first. */
    let buf: Buffer = Buffer.alloc(0);
    /** What arrives while a request is answered (pipelining), in order. */
    let heldBack: Buffer[] = [];
    let held = 0;
    let current: LaneResponse | null = null;
    let ended = false;
    const state = { idle: true };
    open.set(socket, state);
    const conn: LaneConnection = { held: null };

    const release = () => {
      conn.held?.release();
      conn.held = null;
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.off('close', onClose);
      socket.off('error', onClose);
      socket.off('timeout', onTimeout);
      socket.setTimeout(0);
      open.delete(socket);
    };
    const takeHeldBack = () => {
      if (heldBack.length) buf = Buffer.concat([buf, ...heldBack]);
      heldBack = [];
      held = 0;
      if (socket.isPaused()) socket.resume();
    };
    const handOff = () => {
      stats.handedOff++;
      release();
      // The bytes the lane read go back in front of the stream, so node's parser reads the connection from the
      // first byte of the request the lane did not answer.
      socket.pause();
      if (buf.length) socket.unshift(buf);
      buf = Buffer.alloc(0);
      o.handOff(socket);
      socket.resume();
    };
    const next = (): void => {
      if (current || socket.destroyed) return;
      if (buf.length === 0) {
        state.idle = true;
        if (closing || ended) socket.end();
        else socket.setTimeout(o.keepAliveMs);
        return;
      }
      const end = buf.indexOf('\r\n\r\n');
      // Only a head that is all here: one that trickles in is node's, with node's header deadline.
      const req = end < 0 ? null : parseLaneHead(buf.toString('latin1', 0, end), socket, conn);
      if (!req) {
        handOff();
        return;
      }
      state.idle = false;
      socket.setTimeout(0);
      const whole = buf;
      buf = buf.subarray(end + 4);
      const res = new LaneResponse(
        socket,
        req.method,
        () => {
          current = null;
          if (req.close) {
            // As node does: nothing after a request that asked to close is read.
            ended = true;
            heldBack = [];
            buf = Buffer.alloc(0);
          }
          takeHeldBack();
          next();
        },
        keepAliveSeconds,
        req.close,
      );
      current = res;
      o.serve(req, res).then(
        (served) => {
          if (served || res.headersSent || res.destroyed) {
            stats.served++;
            return;
          }
          // Not the lane's after all: node gets the whole request back, and what came after it.
          current = null;
          buf = whole;
          takeHeldBack();
          handOff();
        },
        (err: unknown) => {
          o.onError(err);
          res.destroy();
        },
      );
    };
    const onData = (chunk: Buffer) => {
      if (ended) return;
      if (current) {
        heldBack.push(chunk);
        held += chunk.length;
        if (held > MAX_BUFFERED) socket.pause();
        return;
      }
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      next();
    };
    const onEnd = () => {
      // The client is done sending: what is in flight is answered, then the connection closes.
      ended = true;
      if (!current) next();
    };
    const onClose = () => {
      release();
      current?.clientGone();
      current = null;
    };
    const onTimeout = () => {
      if (state.idle) socket.destroy();
    };
    socket.on('data', onData);
    socket.on('end', onEnd);
    socket.on('close', onClose);
    socket.on('error', onClose);
    socket.on('timeout', onTimeout);
  };

  return {
    accept,
    stats,
    close() {
      closing = true;
      for (const [socket, state] of open) if (state.idle) socket.end();
    },
  };
}
