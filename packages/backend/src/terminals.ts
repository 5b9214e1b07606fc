// The workspace terminals: shells on real ptys (docker/grove-pty) started as the agent's user, served as /terminals and a WebSocket each.
import { spawn } from 'node:child_process';
import type { ChildProcess, SpawnOptions } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex, Writable } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import {
  GroveError,
  MAX_TERMINALS,
  TERMINAL_EXIT_CLOSE_CODE,
  TERMINAL_SCROLLBACK_BYTES,
  createTerminalRequestSchema,
  parseOrThrow,
  terminalControlSchema,
  terminalIdSchema,
} from '@grove/contracts';
import type { CreateTerminalResponse, TerminalInfo, TerminalListResponse } from '@grove/contracts';
import { readJsonBody, sendError, sendJson } from './http.ts';
import type { Logger } from './logger.ts';
import type { AgentUser } from './providers/types.ts';

export const DEFAULT_PTY_HELPER = '/opt/grove/grove-pty';
/** A socket that has this much output queued is too slow to keep: it is dropped (it can reconnect and replay). */
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;
/** After a hang-up, how long a shell may take to exit before its helper is killed. */
const HANGUP_GRACE_MS = 2000;
const PATH_RE = /^\/terminals(?:\/([^/]+)(\/socket)?)?\/?$/;

export interface TerminalsOptions {
  /** The grove-pty executable. */
  helperPath: string;
  /** The shell's cwd. */
  workspaceDir: string;
  /** The agent's user: the helper (and so the shell) runs as it. Null: as the backend (tests outside a sandbox). */
  user: AgentUser | null;
  /** The agent's environment; the shell gets it with TERM, HOME and SHELL set. */
  env: Record<string, string>;
  maxBodyBytes: number;
  logger: Logger;
}

interface Terminal {
  info: TerminalInfo;
  child: ChildProcess;
  control: Writable;
  scrollback: Buffer[];
  scrollbackBytes: number;
  sockets: Set<WebSocket>;
  exited: boolean;
}

export interface Terminals {
  matches(pathname: string): boolean;
  handle(req: IncomingMessage, res: ServerResponse): void;
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Ends every terminal (the container is stopping). */
  close(): Promise<void>;
}

export function createTerminals(options: TerminalsOptions): Terminals {
  const log = options.logger.child({ component: 'terminals' });
  const terminals = new Map<string, Terminal>();
  const wss = new WebSocketServer({ noServer: true, clientTracking: false, maxPayload: 64 * 1024 });
  let closing = false;
  const shell = existsSync('/bin/bash') ? '/bin/bash' : '/bin/sh';

  const resize = (t: Terminal, cols: number, rows: number): void => {
    if (t.exited) return;
    const frame = Buffer.alloc(5);
    frame.write('R', 0, 'latin1');
    frame.writeUInt16BE(cols, 1);
    frame.writeUInt16BE(rows, 3);
    t.control.write(frame);
    t.info = { ...t.info, cols, rows };
  };

  const output = (t: Terminal, chunk: Buffer): void => {
    t.scrollback.push(chunk);
    t.scrollbackBytes += chunk.length;
    while (t.scrollbackBytes > TERMINAL_SCROLLBACK_BYTES) {
      const first = t.scrollback[0] as Buffer;
      const excess = t.scrollbackBytes - TERMINAL_SCROLLBACK_BYTES;
      if (first.length <= excess) {
        t.scrollback.shift();
        t.scrollbackBytes -= first.length;
      } else {
        t.scrollback[0] = first.subarray(excess);
        t.scrollbackBytes -= excess;
      }
    }
    for (const ws of t.sockets) {
      if (ws.readyState !== WebSocket.OPEN) continue;
      if (ws.bufferedAmount > MAX_BUFFERED_BYTES) {
        log.warn({ terminal: t.info.id }, 'terminal client too slow; disconnecting it');
        ws.terminate();
        continue;
      }
      ws.send(chunk, { binary: true });
    }
  };

  const create = (cols: number, rows: number): Terminal => {
    if (closing) throw new GroveError('invalid_state', 'the backend is shutting down');
    if (terminals.size >= MAX_TERMINALS) {
      throw new GroveError('terminal_limit', `this workspace already has ${MAX_TERMINALS} terminals; close one first`, { details: { limit: MAX_TERMINALS } });
    }
    const id = `t${randomBytes(8).toString('hex')}`;
    const env: Record<string, string> = {
      ...options.env,
      TERM: 'xterm-256color',
      COLORTERM: 'truecolor',
      HOME: options.env.HOME ?? '/home/grove',
      SHELL: shell,
    };
    if (options.user) {
      env.USER = 'grove';
      env.LOGNAME = 'grove';
    }
    // fd 3 is the helper's control channel (resize frames); stdin/stdout carry only terminal bytes.
    const spawnOptions: SpawnOptions = {
      cwd: options.workspaceDir,
      env: env as NodeJS.ProcessEnv,
      stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
      ...(options.user ? { uid: options.user.uid, gid: options.user.gid } : {}),
    };
    const child: ChildProcess = spawn(options.helperPath, [String(cols), String(rows), '--', shell, '-l'], spawnOptions);
    const control = child.stdio[3] as Writable;
    const t: Terminal = {
      info: { id, cols, rows, createdAt: new Date().toISOString() },
      child,
      control,
      scrollback: [],
      scrollbackBytes: 0,
      sockets: new Set(),
      exited: false,
    };
    for (const s of [child.stdin, control]) s?.on('error', (err: Error) => log.debug({ err, terminal: id }, 'terminal pipe error'));
    child.stdout?.on('data', (chunk: Buffer) => output(t, chunk));
    child.stderr?.on('data', (chunk: Buffer) => log.warn({ terminal: id, stderr: chunk.toString('utf8').slice(0, 500) }, 'pty helper said something'));
    child.on('error', (err) => {
      log.error({ err, terminal: id }, 'could not start the pty helper');
      finish(t, 'the terminal could not start');
    });
    child.on('exit', (code, signal) => finish(t, signal ? `the shell was killed (${signal})` : `the shell exited (status ${code ?? '?'})`));
    terminals.set(id, t);
    log.info({ terminal: id, cols, rows }, 'terminal started');
    return t;
  };

  const finish = (t: Terminal, reason: string): void => {
    if (t.exited) return;
    t.exited = true;
    terminals.delete(t.info.id);
    log.info({ terminal: t.info.id, reason }, 'terminal ended');
    for (const ws of t.sockets) ws.close(TERMINAL_EXIT_CLOSE_CODE, reason);
    t.sockets.clear();
  };

  /** Hang the terminal up (its stdin closes: the helper SIGHUPs the shell), then kill what is left. */
  const hangUp = (t: Terminal): Promise<void> => {
    if (t.exited) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => t.child.kill('SIGKILL'), HANGUP_GRACE_MS);
      t.child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      t.child.stdin?.end();
      t.control.end();
    });
  };

  const lookup = (rawId: string): Terminal => {
    const parsed = terminalIdSchema.safeParse(rawId);
    const t = parsed.success ? terminals.get(parsed.data) : undefined;
    if (!t) throw new GroveError('not_found', 'no such terminal (it may have exited)');
    return t;
  };

  const route = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const pathname = new URL(req.url ?? '/', 'http://backend').pathname;
    const m = PATH_RE.exec(pathname);
    const id = m?.[1];
    if (m && id === undefined && req.method === 'GET') {
      sendJson(res, 200, { terminals: [...terminals.values()].map((t) => t.info) } satisfies TerminalListResponse);
      return;
    }
    if (m && id === undefined && req.method === 'POST') {
      const body = parseOrThrow(createTerminalRequestSchema, await readJsonBody(req, options.maxBodyBytes), { what: 'terminal' });
      const t = create(body.cols, body.rows);
      sendJson(res, 201, { id: t.info.id } satisfies CreateTerminalResponse);
      return;
    }
    if (m && id !== undefined && m[2] === undefined && req.method === 'DELETE') {
      req.resume();
      await hangUp(lookup(id));
      sendJson(res, 200, { id } satisfies CreateTerminalResponse);
      return;
    }
    throw new GroveError('not_found', `no route for ${req.method ?? '?'} ${pathname}`);
  };

  const attach = (t: Terminal, ws: WebSocket): void => {
    if (t.exited) {
      ws.close(TERMINAL_EXIT_CLOSE_CODE, 'the shell exited');
      return;
    }
    t.sockets.add(ws);
    ws.on('error', (err) => log.debug({ err, terminal: t.info.id }, 'terminal socket error'));
    ws.on('close', () => t.sockets.delete(ws));
    // The replay first, as one frame, so a reconnecting page redraws before any new output arrives.
    if (t.scrollbackBytes > 0) ws.send(Buffer.concat(t.scrollback), { binary: true });
    ws.on('message', (data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean) => {
      const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
      if (!isBinary) {
        // A text frame that is a control message is control; any other text is typed input.
        const control = parseControl(bytes.toString('utf8'));
        if (control) {
          resize(t, control.cols, control.rows);
          return;
        }
      }
      if (!t.exited) t.child.stdin?.write(bytes);
    });
  };

  return {
    matches: (pathname) => pathname === '/terminals' || pathname.startsWith('/terminals/'),
    handle(req, res) {
      route(req, res).catch((err: unknown) => sendError({ req, res, err, logger: log }));
    },
    upgrade(req, socket, head) {
      socket.on('error', (err) => log.debug({ err }, 'terminal upgrade socket error'));
      const m = PATH_RE.exec(new URL(req.url ?? '/', 'http://backend').pathname);
      let t: Terminal;
      try {
        if (closing) throw new GroveError('backend_unavailable', 'the backend is shutting down');
        if (!m || m[1] === undefined || m[2] === undefined) throw new GroveError('not_found', 'no such socket');
        t = lookup(m[1]);
      } catch (err) {
        const e = err instanceof GroveError ? err : new GroveError('internal', 'terminal upgrade failed');
        const body = JSON.stringify(e.toBody());
        socket.end(`HTTP/1.1 ${e.status} ${e.code}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => attach(t, ws));
    },
    async close() {
      closing = true;
      await Promise.all([...terminals.values()].map((t) => hangUp(t)));
    },
  };
}

function parseControl(text: string): { cols: number; rows: number } | null {
  if (!text.startsWith('{')) return null;
  try {
    const parsed = terminalControlSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}
