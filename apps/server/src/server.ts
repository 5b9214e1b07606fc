// The front door: one HTTP server that dispatches /api, /w/<slug> and everything else (the dashboard), and the
// preview listener on another port (another origin) that serves only /pv/<cap>/<slug>/<port>/… (see preview.ts).
import fs from 'node:fs';
import http from 'node:http';
import type { Socket } from 'node:net';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { getRequestListener } from '@hono/node-server';
import type { Logger } from 'pino';
import type { Grove } from '@grove/core';
import { GroveError, endpoints } from '@grove/contracts';
import { createApi } from './api.ts';
import { authorize, loginCookie, tokenMatches } from './auth.ts';
import { sendError } from './errors.ts';
import { createLane, type LaneHandler } from './lane.ts';
import { parsePreviewListenerPath, previewOrigin, previewRest, previewUrlOf, scrubPreviewResponse } from './preview.ts';
import { createWorkspaceProxy, parseProxyPath, rejectUpgrade, scrubWorkspaceResponse, type ProxyTarget } from './proxy.ts';

interface NextApp {
  prepare(): Promise<void>;
  getRequestHandler(): (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void>;
}

type NodeHandler = (req: http.IncomingMessage, res: http.ServerResponse) => void | Promise<void>;

export interface GroveServerOptions {
  grove: Grove;
  logger: Logger;
  token: string;
  /** Next.js request handler for the dashboard; a small built-in page when absent. */
  web?: NodeHandler;
  /** GROVE_PREVIEW_URL: the preview listener's public origin, when a reverse proxy puts it elsewhere. */
  previewUrl?: string | undefined;
  /** GROVE_BACKEND_TIMEOUT_MS: how long a backend may take to start its answer (proxy.ts). */
  backendTimeoutMs?: number | undefined;
  /** GROVE_FAST_LANE: body-less GET/HEAD under /w/<slug>/ skip node's request objects (lane.ts); on by default. */
  fastLane?: boolean | undefined;
}

export interface GroveServer {
  server: http.Server;
  previewServer: http.Server;
  listen(port: number, host: string): Promise<number>;
  /** The preview listener; until it listens, /w/<slug>/preview/ answers 500 (unless previewUrl is set). */
  listenPreview(port: number, host: string): Promise<number>;
  close(): Promise<void>;
  /** The fast lane's counts (lane.ts), or null when it is off. */
  readonly lane: { served: number; handedOff: number } | null;
}

const FALLBACK_PAGE = `<!doctype html><meta charset="utf-8"><title>Grove</title>
<body style="font-family:system-ui;max-width:40rem;margin:4rem auto;line-height:1.5">
<h1>Grove is running</h1><p>The dashboard is not built yet. Run <code>npm run build -w @grove/web</code> and restart,
or use the API: <code>GET /api/workspaces</code>.</p></body>`;

const PUBLIC_PATHS = new Set<string>(Object.values(endpoints).flatMap((e) => ('public' in e && e.public ? [e.path] : [])));

export function createGroveServer(opts: GroveServerOptions): GroveServer {
  const { grove, logger, token } = opts;
  let previewPort: number | undefined;
  const previewUrl = (host: string | undefined, slug: string, port: number) => previewUrlOf(previewOrigin(host, { configured: opts.previewUrl, port: previewPort }), token, slug, port);
  const api = getRequestListener(createApi({ grove, logger, previewUrl }).fetch);
  const answerTimeoutMs = opts.backendTimeoutMs;
  const proxy = createWorkspaceProxy({ grove, logger, onResponseHeaders: scrubWorkspaceResponse, answerTimeoutMs });
  const previewProxy = createWorkspaceProxy({ grove, logger, onResponseHeaders: scrubPreviewResponse, answerTimeoutMs });
  const sockets = new Set<Duplex>();

  /** The preview listener's URL of /w/<slug>/preview/<port>/<rest>?q, or null when target is not a preview path. */
  const previewLocation = (req: http.IncomingMessage, target: ProxyTarget): string | null => {
    const p = previewRest(target.path);
    if (!p) return null;
    const origin = previewOrigin(req.headers.host, { configured: opts.previewUrl, port: previewPort });
    return previewUrlOf(origin, token, target.slug, p.port, p.rest || '/', p.query);
  };

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const url = req.url ?? '/';
    // Nothing of the dashboard's origin may be framed: a preview is same-site (cookies ignore ports), so a
    // frame of it would carry the cookie and could be clickjacked.
    res.setHeader('x-frame-options', 'DENY');
    res.setHeader('content-security-policy', "frame-ancestors 'none'");
    // The table marks what answers without a token (the health check); everything else under /api needs one.
    if (PUBLIC_PATHS.has(url)) {
      await api(req, res);
      return;
    }
    if (url.startsWith('/login')) {
      const given = new URL(url, 'http://grove.invalid').searchParams.get('token');
      if (!tokenMatches(given, token)) throw new GroveError('unauthorized', 'that token is not valid for this Grove');
      res.writeHead(303, { 'set-cookie': loginCookie(token), location: '/' });
      res.end();
      return;
    }
    const target = url.startsWith('/w/') ? parseProxyPath(url) : null;
    if (url.startsWith('/api/') || target) {
      authorize(req, { token, upgrade: false });
    }
    if (target) {
      // Previews never run on this origin: the signed-in user is sent to the preview listener.
      const location = previewLocation(req, target);
      if (location) {
        res.writeHead(302, { location, 'cache-control': 'no-store', 'referrer-policy': 'no-referrer', 'content-length': 0 });
        res.end();
        return;
      }
      await proxy.web(req, res, target);
      return;
    }
    if (url.startsWith('/api/')) {
      await api(req, res);
      return;
    }
    if (opts.web) {
      await opts.web(req, res);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(FALLBACK_PAGE);
  };

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err: unknown) => sendError(res, err, logger));
  });

  // The fast lane takes each new connection first and gives it to node's own listener at the first request it does
  // not answer itself. Its answers come from the same checks as handle()'s for /w/: any of them that would not let the
  // request through (no token, no such route, a preview, a backend that is not there) hands the request to node,
  // whose answer it then is.
  const serveLane: LaneHandler = async (req, res) => {
    const message = req as unknown as http.IncomingMessage;
    let target: ProxyTarget | null;
    try {
      authorize(message, { token, upgrade: false });
      target = parseProxyPath(req.url);
    } catch {
      return false;
    }
    if (!target || previewRest(target.path)) return false;
    try {
      await proxy.lane(req, res, target);
    } catch {
      return res.headersSent;
    }
    return true;
  };
  const nodeListener = server.listeners('connection')[0] as ((socket: Socket) => void) | undefined;
  const lane =
    opts.fastLane === false || !nodeListener
      ? null
      : createLane({
          handOff: (socket) => nodeListener.call(server, socket),
          serve: serveLane,
          keepAliveMs: server.keepAliveTimeout,
          onError: (err: unknown) => logger.error({ err }, 'the fast lane failed on a request'),
        });
  if (lane && nodeListener) {
    server.off('connection', nodeListener);
    server.prependListener('connection', (socket: Socket) => lane.accept(socket));
  }

  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const run = async () => {
      authorize(req, { token, upgrade: true });
      const target = parseProxyPath(req.url ?? '/');
      if (!target) throw new GroveError('not_found', `no WebSocket endpoint at ${req.url ?? '/'}`);
      // A WebSocket cannot follow a redirect: say where the preview is.
      const location = previewLocation(req, target);
      if (location) {
        throw new GroveError('not_found', `previews are not served on the dashboard's origin; open the WebSocket at ${location.replace(/^http/, 'ws')}`, { details: { location } });
      }
      await proxy.ws(req, socket, head, target);
    };
    run().catch((err: unknown) => rejectUpgrade(socket, err, logger));
  });

  // The preview listener: /pv/<cap>/<slug>/<port>/… only, authorized by the cap (no cookie, no token); 404 for
  // everything else, so no /api, no /w and no dashboard on this origin.
  const previewServer = http.createServer((req, res) => {
    const run = async () => {
      const target = parsePreviewListenerPath(req.url ?? '/', token);
      await previewProxy.web(req, res, target);
    };
    run().catch((err: unknown) => {
      res.setHeader('referrer-policy', 'no-referrer');
      sendError(res, err, logger);
    });
  });
  previewServer.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const run = async () => {
      const target = parsePreviewListenerPath(req.url ?? '/', token);
      await previewProxy.ws(req, socket, head, target);
    };
    run().catch((err: unknown) => rejectUpgrade(socket, err, logger));
  });

  for (const srv of [server, previewServer]) {
    srv.on('connection', (s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
  }

  const listenOn = (srv: http.Server, port: number, host: string) =>
    new Promise<number>((resolve, reject) => {
      srv.once('error', reject);
      srv.listen(port, host, () => {
        const addr = srv.address();
        resolve(typeof addr === 'object' && addr ? addr.port : port);
      });
    });

  return {
    server,
    previewServer,
    listen: (port, host) => listenOn(server, port, host),
    lane: lane?.stats ?? null,
    async listenPreview(port, host) {
      previewPort = await listenOn(previewServer, port, host);
      return previewPort;
    },
    async close() {
      // Stop accepting, give in-flight requests a moment, then cut long-lived streams.
      const closing = [server, previewServer].map((srv) => (srv.listening ? new Promise<void>((resolve) => srv.close(() => resolve())) : Promise.resolve()));
      lane?.close();
      server.closeIdleConnections();
      previewServer.closeIdleConnections();
      const timer = setTimeout(() => {
        for (const s of sockets) s.destroy();
      }, 2_000);
      await Promise.all(closing);
      clearTimeout(timer);
      proxy.close();
      previewProxy.close();
    },
  };
}

/** The Next.js dashboard, mounted by Next's public API when it has been built; otherwise undefined. */
export async function loadWeb(webDir: string, logger: Logger): Promise<NodeHandler | undefined> {
  if (!fs.existsSync(path.join(webDir, '.next', 'BUILD_ID'))) {
    logger.warn({ webDir }, 'dashboard not built; serving the fallback page');
    return undefined;
  }
  // next is CommonJS: under NodeNext its default import is module.exports, typed as the namespace.
  const mod = (await import('next')) as unknown as { default: (o: { dev: boolean; dir: string }) => NextApp };
  const app = mod.default({ dev: false, dir: webDir });
  await app.prepare();
  const handler = app.getRequestHandler();
  return (req, res) => handler(req, res);
}
