// Helpers for the backend's own tests: an in-process backend on a temp socket, HTTP and WebSocket clients for it.
import { request } from 'node:http';
import { mkdtemp, mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import { streamFrameSchema } from '@grove/contracts';
import type { StreamFrame } from '@grove/contracts';
import { createBackend } from './backend.ts';
import type { Backend, BackendOptions } from './backend.ts';
import { createLogger } from './logger.ts';

export interface LogRecord {
  level: string;
  msg?: string;
  [key: string]: unknown;
}

export interface TestBackend {
  backend: Backend;
  root: string;
  socketPath: string;
  threadDir: string;
  workspaceDir: string;
  logs: LogRecord[];
  /** Closes the backend (idempotent) and removes the temp dir. */
  dispose(): Promise<void>;
}

export async function makeDirs(): Promise<{ root: string; socketPath: string; threadDir: string; workspaceDir: string }> {
  // Short path: a Unix socket path must fit in ~107 bytes.
  const root = await mkdtemp(join(tmpdir(), 'gb-'));
  const workspaceDir = join(root, 'ws');
  await mkdir(workspaceDir);
  return { root, socketPath: join(root, 'b.sock'), threadDir: join(root, 'thread'), workspaceDir };
}

export async function startBackend(overrides: Partial<BackendOptions> & { root?: string } = {}): Promise<TestBackend> {
  const dirs = overrides.root
    ? { root: overrides.root, socketPath: join(overrides.root, 'b.sock'), threadDir: join(overrides.root, 'thread'), workspaceDir: join(overrides.root, 'ws') }
    : await makeDirs();
  const logs: LogRecord[] = [];
  const logger = createLogger({ level: 'debug', write: (line) => void logs.push(JSON.parse(line) as LogRecord) });
  const backend = createBackend({ slug: 'demo~test', provider: 'scripted', scriptedDelayMs: 2, logger, ...dirs, ...overrides });
  await backend.listen();
  return {
    backend,
    ...dirs,
    logs,
    dispose: async () => {
      await backend.close();
      await rm(dirs.root, { recursive: true, force: true });
    },
  };
}

export interface HttpResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: unknown;
}

export function http(socketPath: string, args: { method?: string; path: string; body?: string | object }): Promise<HttpResult> {
  const body = args.body === undefined ? undefined : typeof args.body === 'string' ? args.body : JSON.stringify(args.body);
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method: args.method ?? 'GET', path: args.path, headers: body === undefined ? {} : { 'content-type': 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown = undefined;
        try {
          json = JSON.parse(text);
        } catch {
          // Not JSON; callers look at text.
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

export const postMessage = (socketPath: string, text: string) => http(socketPath, { method: 'POST', path: '/messages', body: { text } });

/** A /stream client that records every frame and lets a test await the first frame matching a predicate. */
export class StreamClient {
  readonly frames: StreamFrame[] = [];
  private readonly waiters: { predicate: (f: StreamFrame) => boolean; resolve: (f: StreamFrame) => void }[] = [];

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data: Buffer) => {
      const frame = streamFrameSchema.parse(JSON.parse(data.toString('utf8')));
      this.frames.push(frame);
      for (const waiter of [...this.waiters]) {
        if (!waiter.predicate(frame)) continue;
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        waiter.resolve(frame);
      }
    });
  }

  static connect(socketPath: string): Promise<StreamClient> {
    const ws = new WebSocket(`ws+unix://${socketPath}:/stream`);
    const client = new StreamClient(ws);
    return new Promise((resolve, reject) => {
      ws.once('error', reject);
      // Resolve once hello is here, so tests start from a known point.
      void client.waitFor((f) => f.type === 'hello').then(() => resolve(client));
    });
  }

  /** The first frame (already received or still to come) matching the predicate. */
  waitFor(predicate: (f: StreamFrame) => boolean): Promise<StreamFrame> {
    const seen = this.frames.find(predicate);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve) => this.waiters.push({ predicate, resolve }));
  }

  waitForTurnEnd(turn: string): Promise<StreamFrame> {
    return this.waitFor((f) => f.type === 'line' && f.line.kind === 'turn_end' && f.line.turn === turn);
  }

  closed(): Promise<{ code: number; reason: string }> {
    if (this.ws.readyState === WebSocket.CLOSED) return Promise.resolve({ code: 1006, reason: '' });
    return new Promise((resolve) => this.ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  }

  close(): void {
    this.ws.close();
  }
}
