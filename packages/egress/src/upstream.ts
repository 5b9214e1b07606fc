// The upstream TCP connection to an address the decision checked: tried in order within one deadline, given
// up when the client goes away meanwhile.
import { connect as netConnect } from 'node:net';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { hostPort } from './address.ts';
import type { Ip } from './address.ts';

export interface ConnectTarget {
  address: string;
  family: 4 | 6;
  port: number;
}

/** Opens the upstream connection to an already-checked address. Tests inject one that refuses anything but loopback. */
export type Connector = (target: ConnectTarget) => Socket;

export const tcpConnector: Connector = (t) => netConnect({ host: t.address, port: t.port, family: t.family });

/** Connect to the checked addresses in order, within one overall connect deadline. */
export async function openUpstream(addresses: Ip[], port: number, client: Duplex, o: { connector: Connector; connectTimeoutMs: number }): Promise<{ socket: Socket; address: string }> {
  const deadline = Date.now() + o.connectTimeoutMs;
  let lastError: unknown = new Error('no address to connect to');
  for (const ip of addresses) {
    const left = deadline - Date.now();
    if (left <= 0 || client.destroyed) break;
    try {
      const socket = await connectOne(o.connector, { address: ip.text, family: ip.family, port }, { timeoutMs: left, client });
      return { socket, address: ip.text };
    } catch (e) {
      lastError = e;
    }
  }
  if (client.destroyed) throw new Error('the client went away while connecting');
  throw lastError;
}

function connectOne(connector: Connector, target: ConnectTarget, o: { timeoutMs: number; client: Duplex }): Promise<Socket> {
  const { timeoutMs, client } = o;
  return new Promise<Socket>((resolve, reject) => {
    let socket: Socket;
    try {
      socket = connector(target);
    } catch (e) {
      reject(e instanceof Error ? e : new Error(String(e)));
      return;
    }
    const done = (err?: Error): void => {
      clearTimeout(timer);
      socket.off('connect', onConnect);
      socket.off('error', onError);
      client.off('close', onClientGone);
      if (err) {
        socket.destroy();
        reject(err);
      } else {
        resolve(socket);
      }
    };
    const onConnect = (): void => done();
    const onError = (e: Error): void => done(e);
    const onClientGone = (): void => done(new Error('the client went away while connecting'));
    const timer = setTimeout(() => done(new Error(`connect to ${hostPort(target.address, target.port)} timed out after ${timeoutMs} ms`)), timeoutMs);
    socket.once('connect', onConnect);
    socket.once('error', onError);
    client.once('close', onClientGone);
  });
}
