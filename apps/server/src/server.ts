// The front door: one HTTP server that dispatches /api, /w/<slug> and everything else (the dashboard).
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { getRequestListener } from '@hono/node-server';
import type { Logger } from 'pino';
import type { Grove } from '@grove/core';
import { GroveError } from '@grove/contracts';
import { createApi } from './api.ts';
import { authorize, loginCookie, tokenMatches } from './auth.ts';
import { sendError, sendJson } from './errors.ts';
import { createWorkspaceProxy, parseProxyPath, rejectUpgrade } from './proxy.ts';

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
}

export interface GroveServer {
  server: http.Server;
  listen(port: number, host: string): Promise<number>;
  close(): Promise<void>;
}

const FALLBACK_PAGE = `<!doctype html><meta charset="utf-8"><title>Grove</title>
<body style="font-family:system-ui;max-width:40rem;margin:4rem auto;line-height:1.5">
<h1>Grove is running</h1><p>The dashboard is not built yet. Run <code>npm run build -w @grove/web</code> and restart,
or use the API: <code>GET /api/workspaces</code>.</p></body>`;

export function createGroveServer(opts: GroveServerOptions): GroveServer {
  const { grove, logger, token } = opts;
  const api = getRequestListener(createApi({ grove, logger }).fetch);
  const proxy = createWorkspaceProxy({ grove, logger });
  const sockets = new Set<Duplex>();

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const url = req.url ?? '/';
    if (url === '/api/health') {
      sendJson(res, 200, { ok: true });
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

  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const run = async () => {
      authorize(req, { token, upgrade: true });
      const target = parseProxyPath(req.url ?? '/');
      if (!target) throw new GroveError('not_found', `no WebSocket endpoint at ${req.url ?? '/'}`);
      await proxy.ws(req, socket, head, target);
    };
    run().catch((err: unknown) => rejectUpgrade(socket, err, logger));
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });

  return {
    server,
    listen(port, host) {
      return new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          const addr = server.address();
          resolve(typeof addr === 'object' && addr ? addr.port : port);
        });
      });
    },
    async close() {
      // Stop accepting, give in-flight requests a moment, then cut long-lived streams.
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const timer = setTimeout(() => {
        for (const s of sockets) s.destroy();
      }, 2_000);
      await closed;
      clearTimeout(timer);
      proxy.close();
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
