// /w/<slug>/… → that workspace's backend over its Unix socket, for HTTP and WebSocket alike.
import http from 'node:http';
import { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { verifyBackendSocket, verifyBackendSocketSync } from '@grove/core';
import type { Grove } from '@grove/core';
import { GroveError, slugSchema } from '@grove/contracts';
import { COOKIE_NAME } from './auth.ts';
import { errorPayload, sendError } from './errors.ts';
import type { LaneRequest, LaneResponse } from './lane.ts';
import { ChunkedDecoder, HOP_BY_HOP, MAX_RESPONSE_HEAD, UPSTREAM_IDLE_MS, HeldUpstream, UpstreamPool, UpstreamProtocolError, framingOf, headText, parseResponseHead, requestHead, type Framing, type UpstreamSource } from './upstream.ts';

const PREFIX = /^\/w\/([^/?#]+)(\/[^?#]*)?(\?.*)?$/;
const HOST_ONLY = /^\/(hold|hold\/release|notes)$/;

export interface ProxyTarget {
  slug: string;
  /** The path the backend sees, always starting with "/". */
  path: string;
  /** Where the browser sees the workspace mounted (x-forwarded-prefix); /w/<slug> when absent. */
  prefix?: string;
}

/** Slugs already found valid (a function of the string alone), so the schema runs once per slug, not per request; bounded. */
const knownSlugs = new Set<string>();

/** Split /w/<slug>/rest?q into slug and backend path; the slug is validated before it is used anywhere. */
export function parseProxyPath(url: string): ProxyTarget | null {
  const m = PREFIX.exec(url);
  if (!m) return null;
  let slug: string;
  try {
    slug = decodeURIComponent(m[1] ?? '');
  } catch {
    throw new GroveError('invalid_name', 'workspace slug in the URL is not valid percent-encoding');
  }
  if (!knownSlugs.has(slug)) {
    if (!slugSchema.safeParse(slug).success) throw new GroveError('invalid_name', `"${slug}" is not a workspace slug (expected <project> or <project>~<name>)`);
    if (knownSlugs.size >= 4096) knownSlugs.clear();
    knownSlugs.add(slug);
  }
  const path = `${m[2] ?? '/'}${m[3] ?? ''}`;
  // The backend's host-only routes (docs/agents.md): the server holds the workspace and writes grove
  // markers itself; through the front door they would let a browser forge them. Normalized the way the
  // backend routes, so dot segments cannot slip past.
  // Only a path with a dot, a percent sign, a backslash or an empty segment can normalize to something else; the
  // rest is tested as it is (no URL object per request).
  const pathname = /[.%\\]|\/\//.test(path) ? new URL(path, 'http://backend').pathname : (m[2] ?? '/');
  if (HOST_ONLY.test(pathname)) {
    throw new GroveError('not_found', `${m[2] ?? '/'} is not reachable through /w/${slug}/`);
  }
  return { slug, path };
}

/**
 * What a request carries into a sandbox: never the Grove token (the backend, and a preview's dev server behind
 * it, run with the agent's privileges), and where it is mounted, so the backend can keep preview redirects and
 * absolute URLs under /w/<slug>.
 */
function prepare(req: http.IncomingMessage, target: ProxyTarget): void {
  req.url = target.path;
  delete req.headers.authorization;
  const cookie = req.headers.cookie === undefined ? '' : withoutGroveCookie(req.headers.cookie);
  if (cookie) req.headers.cookie = cookie;
  else delete req.headers.cookie;
  req.headers['x-forwarded-prefix'] = target.prefix ?? `/w/${target.slug}`;
}

/** A Cookie header without Grove's own cookie (empty when nothing else is left). */
function withoutGroveCookie(cookie: string): string {
  return cookie
    .split(';')
    .map((c) => c.trim())
    .filter((c) => c && !c.startsWith(`${COOKIE_NAME}=`))
    .join('; ');
}

export interface WorkspaceProxy {
  web(req: http.IncomingMessage, res: http.ServerResponse, target: ProxyTarget): Promise<void>;
  /**
   * A request of the front door's fast lane (lane.ts): the same routing, header rules, framing and hook as web(), over
   * the connection to the backend that the client's connection keeps while its requests go to the same socket.
   */
  lane(req: LaneRequest, res: LaneResponse, target: ProxyTarget): Promise<void>;
  ws(req: http.IncomingMessage, socket: Duplex, head: Buffer, target: ProxyTarget): Promise<void>;
  close(): void;
}

/**
 * A workspace's backend answers on the dashboard's origin, but it is not trusted like Grove: it is Grove's own
 * process (root in the sandbox; the agent can neither replace its socket nor signal it), yet it serves what the
 * agent builds (previews, ports) and could be exploited through them. Nothing it sends may act on that origin: no cookies (they would shadow or evict Grove's), no site-data
 * wipe, no policy of its own; a document it serves renders sandboxed in an opaque origin with no script, so it
 * can neither read the API with the user's cookie nor drive it. The dashboard only fetches JSON and opens
 * WebSockets here, which a CSP does not affect.
 */
export function scrubWorkspaceResponse(headers: http.IncomingHttpHeaders): void {
  for (const h of ['set-cookie', 'clear-site-data', 'service-worker-allowed', 'content-security-policy', 'content-security-policy-report-only', 'x-frame-options']) {
    delete headers[h];
  }
  headers['content-security-policy'] = "sandbox; default-src 'none'; frame-ancestors 'none'";
  headers['x-content-type-options'] = 'nosniff';
  headers['x-frame-options'] = 'DENY';
}

type ResponseHook = (headers: http.IncomingHttpHeaders) => void;

/** How long a backend may take to start its answer when the server is not told otherwise (GROVE_BACKEND_TIMEOUT_MS). */
export const DEFAULT_ANSWER_TIMEOUT_MS = 60_000;

export function createWorkspaceProxy(opts: {
  grove: Grove;
  logger: Logger;
  onResponseHeaders?: ResponseHook;
  /**
   * The most a backend may take from the request (its body included) to the head of its answer; then the client
   * gets 504 backend_timeout and the connection to the backend is closed. A body that follows may take its time.
   */
  answerTimeoutMs?: number | undefined;
  /** How long a pooled connection to a backend may stay idle (UPSTREAM_IDLE_MS; tests shorten it). */
  upstreamIdleMs?: number | undefined;
}): WorkspaceProxy {
  const { grove, logger, onResponseHeaders } = opts;
  const answerTimeoutMs = opts.answerTimeoutMs ?? DEFAULT_ANSWER_TIMEOUT_MS;
  const idleMs = opts.upstreamIdleMs ?? UPSTREAM_IDLE_MS;
  // Keep-alive to the upstream sockets is essential: without it every request pays a connect
  // (docs/benchmarks.md). One pool per backend socket, tied to the socket it was made for: when the file at
  // that path is another socket (a restarted backend), the old pool's connections are dropped, never reused.
  const pools = new Map<string, { key: string; agent: http.Agent }>();
  const poolFor = (socketPath: string, key: string): http.Agent => {
    const cur = pools.get(socketPath);
    if (cur?.key === key) return cur.agent;
    cur?.agent.destroy();
    // `timeout` retires idle connections only (a request in flight has its own deadline, answerTimeoutMs): without
    // it node keeps them until the backend closes them, and a message sent as it does was lost with a 502.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64, timeout: idleMs });
    pools.set(socketPath, { key, agent });
    return agent;
  };
  const leanPools = new Map<string, UpstreamPool>();
  const leanPoolFor = (socketPath: string): UpstreamPool => {
    let pool = leanPools.get(socketPath);
    if (!pool) {
      pool = new UpstreamPool(socketPath, idleMs);
      leanPools.set(socketPath, pool);
    }
    return pool;
  };
  return {
    async web(req, res, t) {
      // Routing and the socket check, for every request: the registry's row (running, and where), then what is at
      // that path. The check is synchronous on purpose: an lstat is a few microseconds, its promise version ten
      // times that and most of the proxy's own time (docs/benchmarks.md).
      const socketPath = await grove.socketFor(t.slug);
      const { key } = verifyBackendSocketSync(socketPath, t.slug);
      prepare(req, t);
      if (bodiless(req)) {
        const pool = leanPoolFor(socketPath);
        const source: UpstreamSource = { take: () => pool.take(key), fresh: () => pool.fresh(), give: (s) => pool.give(key, s) };
        const method = req.method ?? 'GET';
        forwardLean(method, requestHead(method, req.url ?? '/', upstreamHeaders(req, 'http')), res, { socketPath, source, logger, onResponseHeaders, answerTimeoutMs });
      } else forward(req, res, { socketPath, agent: poolFor(socketPath, key), logger, onResponseHeaders, answerTimeoutMs });
    },
    async lane(req, res, t) {
      // Routing for every request, as web(): the registry's row says whether the workspace runs and where.
      const socketPath = await grove.socketFor(t.slug);
      const cur = req.conn.held;
      let held: HeldUpstream;
      if (cur instanceof HeldUpstream && cur.socketPath === socketPath) held = cur;
      else {
        cur?.release();
        // The socket is checked each time a connection to it is opened (HeldUpstream.fresh): a connection made to the
        // backend that was checked stays with that backend, whatever is at the path later.
        held = new HeldUpstream(socketPath, () => verifyBackendSocketSync(socketPath, t.slug), idleMs);
        req.conn.held = held;
      }
      forwardLean(req.method, laneRequestHead(req, t), res as unknown as http.ServerResponse, { socketPath, source: held, logger, onResponseHeaders, answerTimeoutMs });
    },
    async ws(req, socket, head, t) {
      const socketPath = await grove.socketFor(t.slug);
      // One connection per upgrade, so one check per upgrade.
      await verifyBackendSocket(socketPath, t.slug);
      prepare(req, t);
      forwardUpgrade(req, socket, head, { socketPath, logger, onResponseHeaders, answerTimeoutMs });
    },
    close() {
      for (const p of pools.values()) p.agent.destroy();
      pools.clear();
      for (const p of leanPools.values()) p.drain();
      leanPools.clear();
    },
  };
}

/** The request's end-to-end headers and the x-forwarded-* ones, as the backend gets them. */
function upstreamHeaders(req: http.IncomingMessage, scheme: 'http' | 'ws'): http.OutgoingHttpHeaders {
  const headers: http.OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && !HOP_BY_HOP.has(k)) headers[k] = v;
  const remote = req.socket.remoteAddress;
  if (remote) headers['x-forwarded-for'] = req.headers['x-forwarded-for'] ? `${String(req.headers['x-forwarded-for'])}, ${remote}` : remote;
  const secure = 'encrypted' in req.socket && req.socket.encrypted;
  headers['x-forwarded-proto'] = secure ? `${scheme}s` : scheme;
  if (req.headers.host) headers['x-forwarded-host'] = req.headers.host;
  return headers;
}

/**
 * The head a lane request goes to the backend with: what prepare() and upstreamHeaders() make of the same request on
 * node's path (the token and Grove's cookie taken out, hop-by-hop headers dropped, the x-forwarded-* ones set), built
 * as one string from the lane's parsed headers (each name once, lower case; lane.ts refused anything else).
 */
export function laneRequestHead(req: LaneRequest, t: ProxyTarget): string {
  let text = `${req.method} ${t.path} HTTP/1.1\r\n`;
  const h = req.headers;
  for (const k in h) {
    const v = h[k];
    if (v === undefined || HOP_BY_HOP.has(k) || k === 'authorization' || k === 'cookie' || k === 'x-forwarded-for' || k === 'x-forwarded-proto' || k === 'x-forwarded-host' || k === 'x-forwarded-prefix') continue;
    text += `${k}: ${String(v)}\r\n`;
  }
  if (h.cookie !== undefined) {
    const cookie = withoutGroveCookie(String(h.cookie));
    if (cookie) text += `cookie: ${cookie}\r\n`;
  }
  const remote = req.socket.remoteAddress;
  const forwarded = h['x-forwarded-for'];
  if (remote) text += `x-forwarded-for: ${forwarded ? `${String(forwarded)}, ${remote}` : remote}\r\n`;
  else if (forwarded) text += `x-forwarded-for: ${String(forwarded)}\r\n`;
  // The lane serves the plain-HTTP listener only (the socket is never a TLS one).
  text += 'x-forwarded-proto: http\r\n';
  if (h.host) text += `x-forwarded-host: ${h.host}\r\n`;
  return `${text}x-forwarded-prefix: ${t.prefix ?? `/w/${t.slug}`}\r\n\r\n`;
}

/**
 * The backend's response headers minus hop-by-hop ones, as [name, value, name, value, …], after the hook's edits;
 * from node's client (an IncomingMessage) or from the lean path's reader, which gives the same two views.
 */
function downstreamHeaders(ur: Pick<http.IncomingMessage, 'headers' | 'rawHeaders'>, hook: ResponseHook | undefined): string[] {
  const out: string[] = [];
  if (hook) {
    // The hook edits the parsed headers (the preview listener and the workspace proxy scrub them); what it leaves is what is sent.
    hook(ur.headers);
    for (const [k, v] of Object.entries(ur.headers)) {
      if (v === undefined || HOP_BY_HOP.has(k)) continue;
      for (const one of Array.isArray(v) ? v : [v]) out.push(k, one);
    }
    return out;
  }
  const raw = ur.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const k = raw[i] ?? '';
    if (!HOP_BY_HOP.has(k.toLowerCase())) out.push(k, raw[i + 1] ?? '');
  }
  return out;
}

interface ForwardOptions {
  socketPath: string;
  logger: Logger;
  onResponseHeaders?: ResponseHook | undefined;
  answerTimeoutMs: number;
}

function timedOut(ms: number): GroveError {
  return new GroveError('backend_timeout', `the workspace backend accepted the request but did not answer within ${ms / 1000} s`);
}

function unavailable(err: Error): GroveError {
  const code = (err as NodeJS.ErrnoException).code;
  return new GroveError('backend_unavailable', `the workspace backend did not answer (${code ?? err.message}); it may be starting or stopped`, { cause: err });
}

/**
 * One HTTP request to the backend over its socket, streamed both ways. Written out rather than through
 * http-proxy, whose per-request passes and event plumbing were most of the front door's cost
 * (docs/benchmarks.md).
 */
function forward(req: http.IncomingMessage, res: http.ServerResponse, o: ForwardOptions & { agent: http.Agent }): void {
  const headers = upstreamHeaders(req, 'http');
  // Framing of the body as the client sent it: a chunked upload stays chunked, a sized one keeps its length.
  if (req.headers['transfer-encoding'] !== undefined) headers['transfer-encoding'] = 'chunked';
  const up = http.request({ socketPath: o.socketPath, agent: o.agent, method: req.method, path: req.url, headers });
  // The deadline runs from the end of the request body: a slow upload is the client's time, not the backend's.
  let deadline: NodeJS.Timeout | undefined;
  up.on('finish', () => {
    deadline = setTimeout(() => up.destroy(timedOut(o.answerTimeoutMs)), o.answerTimeoutMs);
  });
  up.on('close', () => clearTimeout(deadline));
  up.on('response', (ur) => {
    clearTimeout(deadline);
    res.writeHead(ur.statusCode ?? 502, ur.statusMessage, downstreamHeaders(ur, o.onResponseHeaders));
    ur.pipe(res);
    ur.on('error', () => res.destroy());
  });
  up.on('error', (err) => {
    // The client went away first (below): nobody is left to answer, and it is not the backend's fault.
    if (res.headersSent || res.destroyed) {
      res.destroy();
      return;
    }
    sendError(res, err instanceof GroveError ? err : unavailable(err), o.logger);
  });
  // A client that goes away mid-response must not leave the upstream request running.
  res.on('close', () => {
    if (!res.writableFinished) up.destroy();
  });
  req.pipe(up);
}

/** A request that carries no body (nearly every request the dashboard makes) takes the lean path. */
function bodiless(req: http.IncomingMessage): boolean {
  const len = req.headers['content-length'];
  return req.headers['transfer-encoding'] === undefined && (len === undefined || len === '0') && req.method !== 'CONNECT';
}

/** The response's headers as node would have parsed them (lower-case names; Set-Cookie a list), for the hook. */
function parsedHeaders(raw: string[]): http.IncomingHttpHeaders {
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const k = (raw[i] ?? '').toLowerCase();
    const v = raw[i + 1] ?? '';
    const cur = out[k];
    if (k === 'set-cookie') out[k] = Array.isArray(cur) ? [...cur, v] : [v];
    else out[k] = cur === undefined ? v : `${String(cur)}, ${v}`;
  }
  return out;
}

interface LeanOptions extends ForwardOptions {
  /** Where connections to the backend come from and go back to (a pool, or the lane's held connection). */
  source: UpstreamSource;
}

/**
 * A body-less request over a pooled connection without node's HTTP client: the head goes out as one write, the
 * response is framed by upstream.ts (strict: anything it cannot frame one way is a 502 and the connection goes),
 * its head passes the hook like every other, and its body is written through as it arrives, with backpressure. A
 * reused connection that closes before any byte of the answer is retried once on a new one (the request has no
 * body, and the backend closes idle connections on its own schedule).
 */
function forwardLean(method: string, text: string, res: http.ServerResponse, o: LeanOptions): void {
  // First, so a source that cannot give a connection (the lane's socket check) throws before anything listens on res.
  const { socket, reused } = o.source.take();
  const x = new LeanExchange(method, text, res, o);
  // A client that goes away mid-response must not leave the upstream request running, nor be retried.
  res.on('close', () => x.clientGone());
  x.attempt(socket, reused);
}

/**
 * The state of one lean request. A class rather than closures: the server runs through tsx, which names every
 * function a closure creates at run time, and on this path that naming cost more than the framing itself.
 */
class LeanExchange {
  private finished = false;
  /** The connection of the current attempt; a retired one's late events are ignored. */
  private socket: Socket | null = null;
  private reused = false;
  private head: Buffer | null = null;
  private framing: Framing | null = null;
  private remaining = 0;
  private decoder: ChunkedDecoder | null = null;
  private keep = false;
  private answered = false;
  private deadline: NodeJS.Timeout | undefined;

  constructor(
    private readonly method: string,
    private readonly text: string,
    private readonly res: http.ServerResponse,
    private readonly o: LeanOptions,
  ) {}

  attempt(socket: Socket, reused: boolean): void {
    this.socket = socket;
    this.reused = reused;
    this.head = null;
    this.framing = null;
    this.remaining = 0;
    this.decoder = null;
    this.keep = false;
    this.answered = false;
    // Until the head of the answer is in: a backend that accepts and never answers must not hold the client forever.
    this.deadline = setTimeout(() => this.fail(socket, timedOut(this.o.answerTimeoutMs)), this.o.answerTimeoutMs);
    socket.on('data', (chunk: Buffer) => {
      if (this.socket !== socket) return;
      try {
        this.data(chunk);
      } catch (err) {
        this.fail(socket, err as Error);
      }
    });
    socket.on('error', (err: Error) => this.fail(socket, err));
    socket.on('close', () => {
      if (this.finished || this.socket !== socket) return;
      // Delimited by the close: the body is complete now.
      if (this.framing?.kind === 'close') {
        this.finished = true;
        this.res.end();
        return;
      }
      this.fail(socket, Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
    });
    // Header values are held as node's parser reads them, one char per byte: written back the same way, a client's
    // UTF-8 reaches the backend as the bytes it sent, not encoded a second time.
    socket.write(this.text, 'latin1');
  }

  clientGone(): void {
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.deadline);
    this.socket?.destroy();
  }

  private done(clean: boolean, last?: Buffer): void {
    clearTimeout(this.deadline);
    this.finished = true;
    const socket = this.socket;
    // Back to its source first: ending the answer may start the next request of a pipelined client at once.
    if (socket && clean && this.keep) this.o.source.give(socket);
    else socket?.destroy();
    // The last bytes go out with the end: a small answer is then one write to the client, head and body together.
    if (last?.length) this.res.end(last);
    else this.res.end();
  }

  private fail(socket: Socket, err: Error): void {
    // A retired attempt's socket still reports its close (or a late error); only the current one counts.
    if (this.finished || this.socket !== socket) return;
    clearTimeout(this.deadline);
    socket.destroy();
    // A timeout is not retried: the backend took the request, and the client has waited its share.
    if (!this.answered && this.reused && !(err instanceof GroveError)) {
      let again: Socket | null = null;
      try {
        again = this.o.source.fresh();
      } catch (e) {
        // The socket's check failed this time (a backend gone, or something else at its path): that is the answer.
        err = e as Error;
      }
      if (again) {
        this.attempt(again, false);
        return;
      }
    }
    this.finished = true;
    const res = this.res;
    if (res.headersSent || res.destroyed) {
      res.destroy();
      return;
    }
    const e =
      err instanceof GroveError
        ? err
        : err instanceof UpstreamProtocolError
        ? new GroveError('backend_unavailable', `the workspace backend's answer is not HTTP/1.1 the proxy can frame: ${err.message}`, { cause: err })
        : unavailable(err);
    sendError(res, e, this.o.logger);
  }

  private write(chunk: Buffer): void {
    if (chunk.length && !this.res.write(chunk)) {
      const socket = this.socket;
      socket?.pause();
      this.res.once('drain', () => socket?.resume());
    }
  }

  private body(chunk: Buffer): void {
    const framing = this.framing;
    if (!framing) return;
    if (framing.kind === 'close') {
      this.write(chunk);
      return;
    }
    if (framing.kind === 'length') {
      const n = Math.min(this.remaining, chunk.length);
      this.remaining -= n;
      if (this.remaining === 0) this.done(n === chunk.length, chunk.subarray(0, n));
      else this.write(chunk.subarray(0, n));
      return;
    }
    if (framing.kind === 'chunked' && this.decoder) {
      const { payload, rest } = this.decoder.push(chunk);
      for (const p of payload) this.write(p);
      if (this.decoder.done) this.done(rest === 0);
      return;
    }
    // No body: bytes here are past the response, so the connection is not clean.
    this.done(chunk.length === 0);
  }

  private data(chunk: Buffer): void {
    this.answered = true;
    if (this.framing) {
      this.body(chunk);
      return;
    }
    let head = this.head ? Buffer.concat([this.head, chunk]) : chunk;
    this.head = head;
    for (;;) {
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > MAX_RESPONSE_HEAD) throw new UpstreamProtocolError('a response head over 64 KiB');
        return;
      }
      const parsed = parseResponseHead(head.toString('latin1', 0, end));
      if (parsed.status === 101) throw new UpstreamProtocolError('101 Switching Protocols to a request that asked for no upgrade');
      const framing = parsed.status < 200 ? null : framingOf(parsed, this.method);
      const rest = head.subarray(end + 4);
      head = rest;
      this.head = rest;
      // An interim answer (100, 103) is not passed on: the final one follows on the same connection.
      if (!framing) {
        if (rest.length === 0) return;
        continue;
      }
      this.framing = framing;
      clearTimeout(this.deadline);
      const headers = parsedHeaders(parsed.raw);
      // Read before the hook edits the headers: whether the backend keeps this connection is its own say.
      this.keep = !parsed.http10 && !/\bclose\b/i.test(String(headers.connection ?? '')) && framing.kind !== 'close';
      this.res.writeHead(parsed.status, parsed.statusText, downstreamHeaders({ headers, rawHeaders: parsed.raw }, this.o.onResponseHeaders));
      if (framing.kind === 'length') this.remaining = framing.length;
      if (framing.kind === 'chunked') this.decoder = new ChunkedDecoder();
      if (framing.kind === 'none' || (framing.kind === 'length' && this.remaining === 0)) {
        this.done(rest.length === 0);
        return;
      }
      if (rest.length) this.body(rest);
      return;
    }
  }
}

/**
 * A WebSocket upgrade to the backend over its socket: the 101's headers go through the same hook as HTTP
 * responses (a handshake's Set-Cookie counts in browsers too), then bytes flow both ways untouched.
 */
function forwardUpgrade(req: http.IncomingMessage, socket: Duplex, early: Buffer, o: ForwardOptions): void {
  const headers = upstreamHeaders(req, 'ws');
  headers.connection = 'Upgrade';
  if (req.headers.upgrade) headers.upgrade = req.headers.upgrade;
  if (socket instanceof Socket) {
    socket.setTimeout(0);
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 0);
  }
  // One connection per upgrade: it becomes the tunnel, so it never goes back to a pool.
  const up = http.request({ socketPath: o.socketPath, agent: false, method: req.method, path: req.url, headers });
  let answered = false;
  const deadline = setTimeout(() => up.destroy(timedOut(o.answerTimeoutMs)), o.answerTimeoutMs);
  up.on('close', () => clearTimeout(deadline));
  socket.on('error', () => up.destroy());
  socket.on('close', () => up.destroy());
  up.on('upgrade', (ur, tunnel, tunnelHead) => {
    clearTimeout(deadline);
    answered = true;
    const pairs = downstreamHeaders(ur, o.onResponseHeaders);
    pairs.push('Connection', 'Upgrade', 'Upgrade', String(ur.headers.upgrade ?? 'websocket'));
    socket.write(headText(`HTTP/1.1 101 ${ur.statusMessage || 'Switching Protocols'}`, pairs), 'latin1');
    if (tunnelHead.length) socket.write(tunnelHead);
    if (early.length) tunnel.write(early);
    tunnel.on('error', () => socket.destroy());
    tunnel.on('close', () => socket.destroy());
    socket.on('close', () => tunnel.destroy());
    tunnel.pipe(socket).pipe(tunnel);
  });
  up.on('response', (ur) => {
    // The backend refused the upgrade: its answer goes back (through the hook), ended by closing the connection.
    clearTimeout(deadline);
    answered = true;
    // Its body arrives decoded, so it goes out sized as it came or delimited by the close.
    const pairs = downstreamHeaders(ur, o.onResponseHeaders);
    pairs.push('Connection', 'close');
    socket.write(headText(`HTTP/1.1 ${ur.statusCode ?? 502} ${ur.statusMessage ?? ''}`, pairs), 'latin1');
    ur.pipe(socket);
    ur.on('error', () => socket.destroy());
  });
  up.on('error', (err) => {
    if (answered) {
      socket.destroy();
      return;
    }
    rejectUpgrade(socket, err instanceof GroveError ? err : unavailable(err), o.logger);
  });
  up.end();
}

/** Refuse an upgrade on the raw socket with a JSON body, since there is no ServerResponse yet. */
export function rejectUpgrade(socket: Duplex, err: unknown, logger: Logger): void {
  const { status, body } = errorPayload(err, logger);
  const text = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? 'Error'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
  );
}
