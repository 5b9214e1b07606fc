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

  // Emitted before http-proxy copies the upstream headers into the response, so changes here are what is sent.
  if (onResponseHeaders) proxy.on('proxyRes', (proxyRes) => onResponseHeaders(proxyRes.headers));

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
      proxy.web(req, res, { target: { socketPath } as unknown as httpProxy.ProxyTarget });
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

/** Refuse an upgrade on the raw socket with a JSON body, since there is no ServerResponse yet. */
export function rejectUpgrade(socket: Duplex, err: unknown, logger: Logger): void {
  const { status, body } = errorPayload(err, logger);
  const text = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? 'Error'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
  );
}
