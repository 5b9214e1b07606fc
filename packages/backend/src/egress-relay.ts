// The sandbox's only way out: a TCP listener on 127.0.0.1 inside the container that pipes every
// connection, byte for byte, to the host's egress gate on /run/grove/egress.sock. The container has
// no network interface but loopback, so HTTP(S)_PROXY points here; every decision is the gate's.
import { createServer, connect } from 'node:net';
import type { Server, Socket } from 'node:net';
import { silentLogger } from './logger.ts';
import type { Logger } from './logger.ts';

export interface EgressRelayOptions {
  /** The gate's socket (GROVE_EGRESS_SOCKET). */
  socketPath: string;
  /** TCP port on the loopback address (GROVE_EGRESS_PORT); 0 picks a free one (tests). */
  port: number;
  host?: string;
  logger?: Logger;
  /** How long a client that has sent nothing waits for the "gate unavailable" answer. Default 1 s. */
  answerDelayMs?: number;
  /** Bound on connecting to the gate's socket. Default 5 s. */
  connectTimeoutMs?: number;
}

export interface EgressRelay {
  /** Resolves with the bound port. */
  listen(): Promise<number>;
  close(): Promise<void>;
}

function unavailable(reason: string): string {
  const body = JSON.stringify({
    code: 'egress_upstream',
    message: `grove egress: the gate is not reachable (${reason}); this sandbox has no other way out`,
    rule: 'gate-unavailable',
  });
  return `HTTP/1.1 502 Bad Gateway\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
}

export function createEgressRelay(opts: EgressRelayOptions): EgressRelay {
  const logger = (opts.logger ?? silentLogger).child({ component: 'egress-relay' });
  const host = opts.host ?? '127.0.0.1';
  const answerDelayMs = opts.answerDelayMs ?? 1_000;
  const connectTimeoutMs = opts.connectTimeoutMs ?? 5_000;
  const open = new Set<Socket>();

  const refuse = (client: Socket, reason: string): void => {
    // Answer once the client has spoken (or after a moment), so it reads a response rather than a reset.
    let answered = false;
    const answer = (): void => {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      if (client.writable) client.end(unavailable(reason));
      else client.destroy();
    };
    const timer = setTimeout(answer, answerDelayMs);
    client.once('data', answer);
    client.resume();
  };

  const onClient = (client: Socket): void => {
    open.add(client);
    client.on('close', () => open.delete(client));
    client.on('error', () => undefined);
    client.pause();
    const gate = connect(opts.socketPath);
    open.add(gate);
    gate.on('close', () => open.delete(gate));
    const timer = setTimeout(() => gate.destroy(new Error(`no answer within ${connectTimeoutMs} ms`)), connectTimeoutMs);
    gate.once('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      const reason = `${e.code ?? e.message} on ${opts.socketPath}`;
      logger.warn({ err: e.message, code: e.code }, 'egress gate unavailable');
      refuse(client, reason);
    });
    gate.once('connect', () => {
      clearTimeout(timer);
      gate.on('error', () => client.destroy());
      client.on('close', () => gate.destroy());
      gate.on('close', () => client.destroy());
      client.pipe(gate);
      gate.pipe(client);
      client.resume();
    });
  };

  const server: Server = createServer(onClient);
  let closing: Promise<void> | null = null;
  return {
    listen() {
      return new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(opts.port, host, () => {
          server.off('error', reject);
          const addr = server.address();
          const port = typeof addr === 'object' && addr ? addr.port : opts.port;
          logger.info({ host, port, gate: opts.socketPath }, 'egress relay listening');
          resolve(port);
        });
      });
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        if (!server.listening) resolve();
        else server.close(() => resolve());
      });
      return closing;
    },
  };
}
