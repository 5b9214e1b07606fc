import { chmod, chown, lstat, unlink } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import type { ErrorCode } from '@grove/contracts';
import type { Logger } from 'pino';
import { createBoundedServer } from './listener-limits.ts';
import type { ListenerLimits } from './listener-limits.ts';

/**
 * The host side of the credential relay (docs/agents.md). Inside the sandbox the agent talks plain
 * HTTP to 127.0.0.1:3129 with a placeholder key; the backend pipes that to
 * /run/grove/provider.sock, which is this listener (<home>/run/<slug>/provider.sock). Here the
 * placeholder is dropped, the real key from the server's environment is added, and the request
 * goes to the one configured upstream (https://api.anthropic.com by default). The sandbox cannot
 * choose the destination, and the key never enters the container.
 *
 * It lives in core for now because core does not depend on @grove/egress yet; it belongs beside
 * the gate there.
 */
export interface ProviderRelayOptions {
  slug: string;
  socketPath: string;
  /** The provider's API base, e.g. https://api.anthropic.com (tests: a plain-HTTP server on 127.0.0.1). */
  upstream: URL;
  /** ANTHROPIC_API_KEY of the server; null answers 503 with how to configure it. */
  apiKey: string | null;
  logger: Logger;
  /** Owner of the socket file (the sandbox uid) when the host may chown; otherwise the file is 0666 in a directory only this sandbox mounts. */
  socketOwner?: { uid: number; gid: number };
  /** Bound on connecting to the upstream. Default 10 s. */
  connectTimeoutMs?: number;
  /** A request or response idle this long is cut. Default 10 min (model streams pause while the model thinks). */
  idleTimeoutMs?: number;
  /** One call per request, relayed or refused, when it ends (the audit trail). */
  onRequest?: (record: RelayRecord) => void;
  /** Bounds on the listener (tests shorten them); defaults: RELAY_LIMITS. */
  limits?: Partial<ListenerLimits>;
  /** Largest request body relayed. Default RELAY_MAX_BODY. */
  maxBodyBytes?: number;
}

export interface RelayRecord {
  slug: string;
  method: string;
  path: string;
  status: number;
  bytesUp: number;
  bytesDown: number;
  ms: number;
  /** The route that relayed it, or the rule that refused it. */
  rule?: string;
  error?: string;
}

export interface ProviderRelay {
  readonly socketPath: string;
  listen(): Promise<void>;
  close(): Promise<void>;
}

/**
 * What is relayed: exactly the Messages API calls Claude Code makes (its requests carry ?beta=true), and the
 * read-only model list. Anything else (the Files, Batches, Admin or Organizations APIs, other methods) would
 * spend or expose the host's key on the agent's say-so and is refused with the rule named.
 */
export interface RelayRoute {
  rule: string;
  method: 'GET' | 'POST';
  /** Matched against the path alone, exactly: no dot segments, no percent-encoding, no trailing slash. */
  path: RegExp;
  /** Query parameters the route accepts (each at most once, plain values); any other one is refused. */
  query: ReadonlySet<string>;
}

export const RELAY_ROUTES: readonly RelayRoute[] = [
  { rule: 'messages', method: 'POST', path: /^\/v1\/messages$/, query: new Set(['beta']) },
  { rule: 'count-tokens', method: 'POST', path: /^\/v1\/messages\/count_tokens$/, query: new Set(['beta']) },
  { rule: 'models', method: 'GET', path: /^\/v1\/models(\/[A-Za-z0-9][A-Za-z0-9._-]{0,199})?$/, query: new Set(['beta', 'limit', 'after_id', 'before_id']) },
];

/**
 * provider.sock is per workspace; Claude Code keeps a few connections and runs a few requests at once
 * (subagents, token counts). A model stream may last long: only receiving the request is bounded in time,
 * the answer is bounded by the upstream idle timeout.
 */
export const RELAY_LIMITS: ListenerLimits = { maxConnections: 64, maxInFlight: 32, headersTimeoutMs: 10_000, requestTimeoutMs: 300_000, idleTimeoutMs: 5_000 };
/** The Messages API's own request limit is 32 MB. */
export const RELAY_MAX_BODY = 32 * 1024 * 1024;

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);
/** Whatever credentials the sandbox sends are dropped; only the host's key goes upstream. */
const CREDENTIAL_HEADERS = new Set(['x-api-key', 'authorization', 'cookie', 'proxy-authorization']);
/** Claims about where the request comes from are the relay's to make, not the sandbox's; Expect is answered here. */
const DROPPED_HEADERS = new Set(['host', 'forwarded', 'via', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-real-ip', 'expect']);
const QUERY_VALUE = /^[A-Za-z0-9_.-]{0,200}$/;

interface Denial {
  status: number;
  code: ErrorCode;
  rule: string;
  message: string;
}

function denial(status: number, rule: string, message: string): Denial {
  const code: ErrorCode = status === 429 ? 'egress_limit' : status === 502 ? 'egress_upstream' : status === 503 ? 'backend_unavailable' : 'egress_denied';
  return { status, code, rule, message: `grove relay: ${message} (rule: ${rule})` };
}

function sendDenial(res: ServerResponse, d: Denial): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  // The Anthropic SDK reads error.message; Grove's clients read code and rule, as from the egress gate.
  const text = JSON.stringify({ type: 'error', error: { type: 'grove_relay_error', message: d.message }, code: d.code, rule: d.rule, message: d.message });
  res.writeHead(d.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'x-grove-relay-rule': d.rule });
  res.end(text);
}

/** Framing the relay and the upstream could read differently is refused before anything is forwarded. */
export function framingDenial(rawHeaders: readonly string[], maxBody: number): Denial | null {
  const lengths: string[] = [];
  const encodings: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = (rawHeaders[i] ?? '').toLowerCase();
    if (name === 'content-length') lengths.push((rawHeaders[i + 1] ?? '').trim());
    if (name === 'transfer-encoding') encodings.push((rawHeaders[i + 1] ?? '').trim().toLowerCase());
  }
  if (lengths.length > 1) return denial(400, 'invalid-request', 'more than one Content-Length');
  if (lengths.length === 1 && encodings.length > 0) return denial(400, 'invalid-request', 'both Content-Length and Transfer-Encoding');
  if (encodings.length > 1 || (encodings.length === 1 && encodings[0] !== 'chunked')) return denial(400, 'invalid-request', 'a Transfer-Encoding other than one "chunked"');
  const length = lengths[0];
  if (length !== undefined && !/^\d{1,12}$/.test(length)) return denial(400, 'invalid-request', `Content-Length "${length.slice(0, 20)}" is not a number`);
  if (length !== undefined && Number(length) > maxBody) return denial(413, 'body-too-large', `the request body is over ${maxBody} bytes`);
  return null;
}

/** The route a request may take, or why it may not. `target` is the request-target as sent. */
export function routeFor(method: string, target: string): { route: RelayRoute } | { denial: Denial } {
  const shown = target.slice(0, 100);
  const q = target.indexOf('?');
  const path = q < 0 ? target : target.slice(0, q);
  const query = q < 0 ? '' : target.slice(q + 1);
  // Only origin-form (/v1/...), and only plain characters: no absolute URL, no %2e%2e, no fragment.
  if (!/^\/[A-Za-z0-9/_.-]*$/.test(path)) {
    return { denial: denial(403, 'path-not-relayed', `${shown} is not a path the relay forwards`) };
  }
  const onPath = RELAY_ROUTES.filter((r) => r.path.test(path));
  if (onPath.length === 0) return { denial: denial(403, 'path-not-relayed', `only the Messages API is relayed, not ${path.slice(0, 100)}`) };
  const route = onPath.find((r) => r.method === method);
  if (!route) return { denial: denial(403, 'method-not-allowed', `${method.slice(0, 20)} ${path.slice(0, 100)} is not relayed (only ${onPath.map((r) => r.method).join(', ')})`) };
  const seen = new Set<string>();
  for (const pair of query === '' ? [] : query.split('&')) {
    const eq = pair.indexOf('=');
    const key = eq < 0 ? pair : pair.slice(0, eq);
    const value = eq < 0 ? '' : pair.slice(eq + 1);
    if (!route.query.has(key) || seen.has(key) || !QUERY_VALUE.test(value)) {
      return { denial: denial(403, 'query-not-allowed', `the query parameter "${key.slice(0, 40)}" is not accepted on ${path}`) };
    }
    seen.add(key);
  }
  return { route };
}

export function upstreamHeaders(incoming: IncomingHttpHeaders, upstream: URL, apiKey: string): OutgoingHttpHeaders {
  // Headers the client names in Connection are hop-by-hop too.
  const listed = new Set(
    String(incoming.connection ?? '')
      .split(',')
      .map((t) => t.trim().toLowerCase())
      .filter(Boolean),
  );
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || HOP_BY_HOP.has(name) || CREDENTIAL_HEADERS.has(name) || DROPPED_HEADERS.has(name) || listed.has(name)) continue;
    out[name] = value;
  }
  out.host = upstream.host;
  out['x-api-key'] = apiKey;
  return out;
}

export function createProviderRelay(opts: ProviderRelayOptions): ProviderRelay {
  const log = opts.logger.child({ slug: opts.slug, component: 'provider-relay' });
  const connectTimeoutMs = opts.connectTimeoutMs ?? 10_000;
  const idleTimeoutMs = opts.idleTimeoutMs ?? 600_000;
  const maxBody = opts.maxBodyBytes ?? RELAY_MAX_BODY;
  const base = opts.upstream.pathname.replace(/\/+$/, '');
  const send = opts.upstream.protocol === 'https:' ? httpsRequest : httpRequest;

  /** One audit record per request, when it ends (allowed ones) or at once (refused ones). */
  const recorder = (req: IncomingMessage) => {
    const t0 = Date.now();
    const target = req.url ?? '/';
    const method = (req.method ?? 'GET').slice(0, 20);
    const counts = { up: 0, down: 0 };
    let recorded = false;
    const record = (status: number, extra: { error?: string; rule?: string; refused?: boolean } = {}): void => {
      if (recorded) return;
      recorded = true;
      const entry: RelayRecord = {
        slug: opts.slug,
        method,
        path: (target.split('?')[0] ?? target).slice(0, 300),
        status,
        bytesUp: counts.up,
        bytesDown: counts.down,
        ms: Date.now() - t0,
        ...(extra.rule ? { rule: extra.rule } : {}),
        ...(extra.error ? { error: extra.error } : {}),
      };
      // Over the in-flight cap the listener logs once per window; one line per refusal would be a log flood.
      if (extra.refused && extra.rule !== 'in-flight-limit') log.warn(entry, 'provider request refused');
      else if (!extra.refused) log.info(entry, 'provider request');
      opts.onRequest?.(entry);
    };
    return { record, counts, method, target };
  };

  const refuse = (req: IncomingMessage, res: ServerResponse, d: Denial, record = recorder(req).record): void => {
    req.resume();
    sendDenial(res, d);
    record(d.status, { rule: d.rule, error: d.message, refused: true });
  };

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const { record, counts, method, target } = recorder(req);
    const framing = framingDenial(req.rawHeaders, maxBody);
    if (framing) {
      // The body cannot be trusted to end where the relay thinks: no reuse of this connection.
      res.shouldKeepAlive = false;
      refuse(req, res, framing, record);
      return;
    }
    const routed = routeFor(method, target);
    if ('denial' in routed) {
      refuse(req, res, routed.denial, record);
      return;
    }
    const rule = routed.route.rule;
    if (!opts.apiKey) {
      refuse(req, res, denial(503, 'no-api-key', 'the server has no ANTHROPIC_API_KEY; set it in the environment of the Grove server and restart it'), record);
      return;
    }

    const upstreamReq = send({
      protocol: opts.upstream.protocol,
      hostname: opts.upstream.hostname,
      port: opts.upstream.port || undefined,
      method,
      path: `${base}${target}`,
      headers: upstreamHeaders(req.headers, opts.upstream, opts.apiKey),
      timeout: connectTimeoutMs,
    });
    let refused = false;
    upstreamReq.on('socket', (s: Socket) => {
      // The connect bound applies until the socket is up; then the idle bound takes over.
      s.once('connect', () => upstreamReq.setTimeout(idleTimeoutMs));
    });
    upstreamReq.on('timeout', () => upstreamReq.destroy(new Error('the provider did not answer in time')));
    upstreamReq.on('error', (err) => {
      if (refused) return;
      log.warn({ err: err.message }, 'provider request failed');
      sendDenial(res, denial(502, rule, `could not reach the provider: ${err.message}`));
      record(502, { rule, error: err.message });
    });
    upstreamReq.on('response', (up) => {
      const headers: OutgoingHttpHeaders = {};
      for (const [name, value] of Object.entries(up.headers)) {
        if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
      }
      res.writeHead(up.statusCode ?? 502, headers);
      up.on('data', (chunk: Buffer) => {
        counts.down += chunk.length;
      });
      up.pipe(res);
      up.on('end', () => record(up.statusCode ?? 502, { rule }));
      up.on('error', (err) => {
        res.destroy(err);
        record(up.statusCode ?? 502, { rule, error: err.message });
      });
    });
    req.on('data', (chunk: Buffer) => {
      counts.up += chunk.length;
      // A chunked body has no declared length: it is counted as it comes.
      if (counts.up > maxBody && !refused) {
        refused = true;
        req.unpipe(upstreamReq);
        upstreamReq.destroy();
        res.shouldKeepAlive = false;
        // The rest of the body is not read: once the refusal is out, the connection goes.
        res.once('finish', () => req.destroy());
        refuse(req, res, denial(413, 'body-too-large', `the request body is over ${maxBody} bytes`), record);
      }
    });
    req.pipe(upstreamReq);
    // The sandbox gave up (cancelled turn): stop the upstream request too, so the stream is not paid for.
    res.on('close', () => {
      if (!res.writableFinished) {
        upstreamReq.destroy();
        record(499, { rule, error: 'client closed the connection' });
      }
    });
  };

  const { server, sockets } = createBoundedServer({
    name: 'provider.sock',
    limits: { ...RELAY_LIMITS, ...opts.limits },
    logger: log,
    handler: handle,
    refuse: (req, res, why) => refuse(req, res, denial(429, 'in-flight-limit', why)),
  });
  let closing: Promise<void> | null = null;

  return {
    socketPath: opts.socketPath,
    async listen() {
      await removeStaleSocket(opts.socketPath);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(opts.socketPath, () => {
          server.off('error', reject);
          resolve();
        });
      });
      if (opts.socketOwner) {
        await chown(opts.socketPath, opts.socketOwner.uid, opts.socketOwner.gid).then(
          () => chmod(opts.socketPath, 0o660),
          () => chmod(opts.socketPath, 0o666),
        );
      } else {
        await chmod(opts.socketPath, 0o666);
      }
      log.debug({ socket: opts.socketPath, upstream: opts.upstream.origin }, 'provider relay listening');
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        if (!server.listening) {
          resolve();
          return;
        }
        server.close(() => {
          void unlink(opts.socketPath).catch(() => undefined);
          resolve();
        });
      });
      return closing;
    },
  };
}

/** A socket file left by an earlier server process is removed; anything else at that path is an error. */
export async function removeStaleSocket(path: string): Promise<void> {
  const stat = await lstat(path).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (stat === null) return;
  if (!stat.isSocket()) throw new Error(`${path} exists and is not a socket`);
  await unlink(path);
}
