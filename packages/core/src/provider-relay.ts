import { chmod, chown, lstat, unlink } from 'node:fs/promises';
import { createServer, request as httpRequest } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, Server, ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';

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
  /** One call per proxied request, when it ends (the audit trail). */
  onRequest?: (record: RelayRecord) => void;
}

export interface RelayRecord {
  slug: string;
  method: string;
  path: string;
  status: number;
  bytesUp: number;
  bytesDown: number;
  ms: number;
  error?: string;
}

export interface ProviderRelay {
  readonly socketPath: string;
  listen(): Promise<void>;
  close(): Promise<void>;
}

/** Only the API itself is relayed; the sandbox has no business elsewhere on the provider's host. */
const ALLOWED_PATH = /^\/v1\/[A-Za-z0-9/_.-]*(\?[^#]*)?$/;
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);
/** Whatever credentials the sandbox sends are dropped; only the host's key goes upstream. */
const CREDENTIAL_HEADERS = new Set(['x-api-key', 'authorization', 'cookie']);

function sendJson(res: ServerResponse, status: number, body: { code: string; message: string }): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const text = JSON.stringify({ type: 'error', error: { type: 'grove_relay_error', message: body.message }, ...body });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export function upstreamHeaders(incoming: IncomingHttpHeaders, upstream: URL, apiKey: string): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || HOP_BY_HOP.has(name) || CREDENTIAL_HEADERS.has(name) || name === 'host') continue;
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
  const base = opts.upstream.pathname.replace(/\/+$/, '');
  const send = opts.upstream.protocol === 'https:' ? httpsRequest : httpRequest;
  const sockets = new Set<Socket>();

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const t0 = Date.now();
    const path = req.url ?? '/';
    const method = req.method ?? 'GET';
    let bytesUp = 0;
    let bytesDown = 0;
    let recorded = false;
    const record = (status: number, error?: string): void => {
      if (recorded) return;
      recorded = true;
      const entry: RelayRecord = { slug: opts.slug, method, path: path.split('?')[0] ?? path, status, bytesUp, bytesDown, ms: Date.now() - t0, ...(error ? { error } : {}) };
      log.info(entry, 'provider request');
      opts.onRequest?.(entry);
    };

    // No dot segments: the upstream would resolve /v1/../x to /x.
    if (!ALLOWED_PATH.test(path) || /(^|\/)\.\.?(\/|\?|$)/.test(path.split('?')[0] ?? '')) {
      req.resume();
      sendJson(res, 404, { code: 'not_found', message: `grove relay: only the provider's /v1/ API is relayed, not ${path.slice(0, 100)}` });
      record(404, 'path not relayed');
      return;
    }
    if (!opts.apiKey) {
      req.resume();
      sendJson(res, 503, { code: 'backend_unavailable', message: 'grove relay: the server has no ANTHROPIC_API_KEY; set it in the environment of the Grove server and restart it' });
      record(503, 'no api key');
      return;
    }

    const upstreamReq = send({
      protocol: opts.upstream.protocol,
      hostname: opts.upstream.hostname,
      port: opts.upstream.port || undefined,
      method,
      path: `${base}${path}`,
      headers: upstreamHeaders(req.headers, opts.upstream, opts.apiKey),
      timeout: connectTimeoutMs,
    });
    upstreamReq.on('socket', (s: Socket) => {
      // The connect bound applies until the socket is up; then the idle bound takes over.
      s.once('connect', () => upstreamReq.setTimeout(idleTimeoutMs));
    });
    upstreamReq.on('timeout', () => upstreamReq.destroy(new Error('the provider did not answer in time')));
    upstreamReq.on('error', (err) => {
      log.warn({ err: err.message }, 'provider request failed');
      sendJson(res, 502, { code: 'egress_upstream', message: `grove relay: could not reach the provider: ${err.message}` });
      record(502, err.message);
    });
    upstreamReq.on('response', (up) => {
      const headers: OutgoingHttpHeaders = {};
      for (const [name, value] of Object.entries(up.headers)) {
        if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
      }
      res.writeHead(up.statusCode ?? 502, headers);
      up.on('data', (chunk: Buffer) => {
        bytesDown += chunk.length;
      });
      up.pipe(res);
      up.on('end', () => record(up.statusCode ?? 502));
      up.on('error', (err) => {
        res.destroy(err);
        record(up.statusCode ?? 502, err.message);
      });
    });
    req.on('data', (chunk: Buffer) => {
      bytesUp += chunk.length;
    });
    req.pipe(upstreamReq);
    // The sandbox gave up (cancelled turn): stop the upstream request too, so the stream is not paid for.
    res.on('close', () => {
      if (!res.writableFinished) {
        upstreamReq.destroy();
        record(499, 'client closed the connection');
      }
    });
  };

  const server: Server = createServer(handle);
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.requestTimeout = 0; // long streams; the idle bound above is what limits them
  server.headersTimeout = 10_000;
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
