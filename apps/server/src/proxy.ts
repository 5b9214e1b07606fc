// /w/<slug>/… → that workspace's backend over its Unix socket, for HTTP and WebSocket alike.
import http from 'node:http';
import type { Duplex } from 'node:stream';
import httpProxy from 'http-proxy';
import type { Logger } from 'pino';
import type { Grove } from '@grove/core';
import { GroveError, slugSchema } from '@grove/contracts';
import { COOKIE_NAME } from './auth.ts';
import { errorPayload, sendError } from './errors.ts';

const PREFIX = /^\/w\/([^/?#]+)(\/[^?#]*)?(\?.*)?$/;
const HOST_ONLY = /^\/(hold|hold\/release|notes)$/;

export interface ProxyTarget {
  slug: string;
  /** The path the backend sees, always starting with "/". */
  path: string;
  /** Where the browser sees the workspace mounted (x-forwarded-prefix); /w/<slug> when absent. */
  prefix?: string;
}

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
  const parsed = slugSchema.safeParse(slug);
  if (!parsed.success) throw new GroveError('invalid_name', `"${slug}" is not a workspace slug (expected <project> or <project>~<name>)`);
  const path = `${m[2] ?? '/'}${m[3] ?? ''}`;
  // The backend's host-only routes (docs/agents.md): the server holds the workspace and writes grove
  // markers itself; through the front door they would let a browser forge them. Normalized the way the
  // backend routes, so dot segments cannot slip past.
  if (HOST_ONLY.test(new URL(path, 'http://backend').pathname)) {
    throw new GroveError('not_found', `${m[2] ?? '/'} is not reachable through /w/${parsed.data}/`);
  }
  return { slug: parsed.data, path };
}

/**
 * What a request carries into a sandbox: never the Grove token (the backend, and a preview's dev server behind
 * it, run with the agent's privileges), and where it is mounted, so the backend can keep preview redirects and
 * absolute URLs under /w/<slug>.
 */
function prepare(req: http.IncomingMessage, target: ProxyTarget): void {
  req.url = target.path;
  delete req.headers.authorization;
  const cookie = req.headers.cookie
    ?.split(';')
    .map((c) => c.trim())
    .filter((c) => c && !c.startsWith(`${COOKIE_NAME}=`))
    .join('; ');
  if (cookie) req.headers.cookie = cookie;
  else delete req.headers.cookie;
  req.headers['x-forwarded-prefix'] = target.prefix ?? `/w/${target.slug}`;
}

export interface WorkspaceProxy {
  web(req: http.IncomingMessage, res: http.ServerResponse, target: ProxyTarget): Promise<void>;
  ws(req: http.IncomingMessage, socket: Duplex, head: Buffer, target: ProxyTarget): Promise<void>;
  close(): void;
}

export function createWorkspaceProxy(opts: { grove: Grove; logger: Logger; onResponseHeaders?: (headers: http.IncomingHttpHeaders) => void }): WorkspaceProxy {
  const { grove, logger, onResponseHeaders } = opts;
  // Keep-alive to the upstream sockets is essential: without an agent http-proxy closes every
  // upstream connection and pays a connect per request. Agent pools are keyed by socketPath.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64 });
  const proxy = httpProxy.createProxyServer({ agent, xfwd: true, proxyTimeout: 0 });


  proxy.on('error', (err, _req, resOrSocket) => {
    const code = (err as NodeJS.ErrnoException).code;
    const gErr = new GroveError('backend_unavailable', `the workspace backend did not answer (${code ?? err.message}); it may be starting or stopped`, { cause: err });
    if (resOrSocket instanceof http.ServerResponse) {
      sendError(resOrSocket, gErr, logger);
      return;
    }
    (resOrSocket as Duplex).destroy();
  });

  return {
    async web(req, res, target) {
      const socketPath = await grove.socketFor(target.slug);
      prepare(req, target);
      forward(req, res, { socketPath, agent, logger, onResponseHeaders });
    },
    async ws(req, socket, head, target) {
      const socketPath = await grove.socketFor(target.slug);
      prepare(req, target);
      proxy.ws(req, socket, head, { target: { socketPath } as unknown as httpProxy.ProxyTarget, agent: undefined });
    },
    close() {
      proxy.close();
      agent.destroy();
    },
  };
}

/** Hop-by-hop headers (RFC 9110 7.6.1): they describe one connection, never the next one. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/**
 * One HTTP request to the backend over its socket, streamed both ways. Written out rather than through
 * http-proxy, whose per-request passes and event plumbing were most of the front door's cost
 * (docs/benchmarks.md); WebSocket upgrades still go through http-proxy.
 */
function forward(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  o: { socketPath: string; agent: http.Agent; logger: Logger; onResponseHeaders?: ((headers: http.IncomingHttpHeaders) => void) | undefined },
): void {
  const headers: http.OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && !HOP_BY_HOP.has(k)) headers[k] = v;
  // Framing of the body as the client sent it: a chunked upload stays chunked, a sized one keeps its length.
  if (req.headers['transfer-encoding'] !== undefined) headers['transfer-encoding'] = 'chunked';
  const remote = req.socket.remoteAddress;
  if (remote) headers['x-forwarded-for'] = req.headers['x-forwarded-for'] ? `${String(req.headers['x-forwarded-for'])}, ${remote}` : remote;
  headers['x-forwarded-proto'] = 'encrypted' in req.socket && req.socket.encrypted ? 'https' : 'http';
  if (req.headers.host) headers['x-forwarded-host'] = req.headers.host;
  const up = http.request({ socketPath: o.socketPath, agent: o.agent, method: req.method, path: req.url, headers });
  up.on('response', (ur) => {
    const out: string[] = [];
    if (o.onResponseHeaders) {
      // The hook edits the parsed headers (the preview listener scrubs them); what it leaves is what is sent.
      o.onResponseHeaders(ur.headers);
      for (const [k, v] of Object.entries(ur.headers)) {
        if (v === undefined || HOP_BY_HOP.has(k)) continue;
        for (const one of Array.isArray(v) ? v : [v]) out.push(k, one);
      }
    } else {
      const raw = ur.rawHeaders;
      for (let i = 0; i + 1 < raw.length; i += 2) {
        const k = raw[i] ?? '';
        if (!HOP_BY_HOP.has(k.toLowerCase())) out.push(k, raw[i + 1] ?? '');
      }
    }
    res.writeHead(ur.statusCode ?? 502, ur.statusMessage, out);
    ur.pipe(res);
    ur.on('error', () => res.destroy());
  });
  up.on('error', (err) => {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const code = (err as NodeJS.ErrnoException).code;
    sendError(res, new GroveError('backend_unavailable', `the workspace backend did not answer (${code ?? err.message}); it may be starting or stopped`, { cause: err }), o.logger);
  });
  // A client that goes away mid-response must not leave the upstream request running.
  res.on('close', () => {
    if (!res.writableFinished) up.destroy();
  });
  req.pipe(up);
}

/** Refuse an upgrade on the raw socket with a JSON body, since there is no ServerResponse yet. */
export function rejectUpgrade(socket: Duplex, err: unknown, logger: Logger): void {
  const { status, body } = errorPayload(err, logger);
  const text = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? 'Error'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
  );
}
