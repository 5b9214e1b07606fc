import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import type { StreamFrame } from '@grove/contracts';
import type { Logger } from './logger.ts';

export const STREAM_PATH = '/stream';

export interface StreamHubOptions {
  logger: Logger;
  /** Builds the first frame for a new client; called at the moment it joins, so it misses nothing after it. */
  hello: () => StreamFrame;
  /** A client this far behind is cut off; it can refetch GET /thread (default 8 MiB). */
  maxBufferedBytes?: number;
  /** Ping period; a client that missed the previous pong is dropped (default 30 s). */
  pingIntervalMs?: number;
}

/** WebSocket /stream: `hello` first, then every frame broadcast to every connected client. */
export class StreamHub {
  private readonly wss = new WebSocketServer({ noServer: true, clientTracking: false, maxPayload: 64 * 1024 });
  private readonly clients = new Set<WebSocket>();
  private readonly alive = new WeakSet<WebSocket>();
  private readonly options: Required<StreamHubOptions>;
  private readonly pinger: NodeJS.Timeout;
  private closing = false;

  constructor(options: StreamHubOptions) {
    this.options = { maxBufferedBytes: 8 * 1024 * 1024, pingIntervalMs: 30_000, ...options };
    this.pinger = setInterval(() => this.ping(), this.options.pingIntervalMs);
    this.pinger.unref();
  }

  get size(): number {
    return this.clients.size;
  }

  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', (err) => this.options.logger.debug({ err }, 'stream socket error'));
    const pathname = new URL(req.url ?? '/', 'http://backend').pathname;
    if (pathname !== STREAM_PATH || this.closing) {
      const status = this.closing ? '503 Service Unavailable' : '404 Not Found';
      socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      return;
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => this.accept(ws));
  }

  broadcast(frame: StreamFrame): void {
    if (this.clients.size === 0) return;
    const data = JSON.stringify(frame);
    for (const ws of this.clients) {
      if (ws.readyState !== WebSocket.OPEN) continue;
      if (ws.bufferedAmount > this.options.maxBufferedBytes) {
        this.options.logger.warn({ bufferedBytes: ws.bufferedAmount }, 'stream client too slow; disconnecting it');
        ws.terminate();
        continue;
      }
      ws.send(data);
    }
  }

  /** Says goodbye (1001) to every client, waits briefly for the close handshakes, then cuts the rest. */
  async close(graceMs = 1000): Promise<void> {
    this.closing = true;
    clearInterval(this.pinger);
    const closed = [...this.clients].map(
      (ws) =>
        new Promise<void>((resolve) => {
          if (ws.readyState === WebSocket.CLOSED) return resolve();
          ws.once('close', () => resolve());
          ws.close(1001, 'backend shutting down');
        }),
    );
    const timer = setTimeout(() => {
      for (const ws of this.clients) ws.terminate();
    }, graceMs);
    await Promise.all(closed);
    clearTimeout(timer);
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }

  private accept(ws: WebSocket): void {
    // hello and joining happen in the same tick, so no frame falls between them.
    ws.send(JSON.stringify(this.options.hello()));
    this.clients.add(ws);
    this.alive.add(ws);
    ws.on('pong', () => this.alive.add(ws));
    ws.on('close', () => this.clients.delete(ws));
    ws.on('error', (err) => this.options.logger.debug({ err }, 'stream client error'));
    // Clients have nothing to say on this channel; incoming messages are ignored.
  }

  private ping(): void {
    for (const ws of this.clients) {
      if (!this.alive.has(ws)) {
        ws.terminate();
        continue;
      }
      this.alive.delete(ws);
      ws.ping();
    }
  }
}
