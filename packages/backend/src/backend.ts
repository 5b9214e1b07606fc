import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { chmod, lstat, mkdir, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { randomUUID } from 'node:crypto';
import {
  GROVE_LINE_PROVIDER,
  GroveError,
  PROVIDER_RELAY_PORT,
  TURN_REPORT_ERROR_MAX,
  holdRequestSchema,
  noteRequestSchema,
  parseOrThrow,
  postMessageRequestSchema,
  releaseHoldRequestSchema,
} from '@grove/contracts';
import type { PortsResponse } from '@grove/contracts';
import type {
  AgentConfig,
  BackendHealth,
  BackendStatus,
  CancelTurnResponse,
  GroveThreadEvent,
  HoldResponse,
  PostMessageResponse,
  ThreadLine,
  ThreadResponse,
  TurnEndedRequest,
  TurnOutcomeStatus,
} from '@grove/contracts';
import { createFilesReader } from './files.ts';
import { notifyTurnEnded } from './host-hook.ts';
import { DEFAULT_MAX_BODY_BYTES, readJsonBody, sendError, sendJson } from './http.ts';
import { silentLogger } from './logger.ts';
import type { Logger } from './logger.ts';
import { createProvider } from './providers/index.ts';
import type { AgentUser, Provider, ProviderLine, ProviderName, TurnContext } from './providers/types.ts';
import { StreamHub } from './stream-hub.ts';
import { DEFAULT_PREVIEW_PORTS, createPreview, listeningPorts } from './preview.ts';
import type { PortRange } from './preview.ts';
import { openThreadStore } from './thread-store.ts';
import { DEFAULT_PTY_HELPER, createTerminals } from './terminals.ts';
import type { ThreadStore } from './thread-store.ts';

/** How long a backend that is shutting down waits for the host to take the report of a cut turn. */
const SHUTDOWN_HOOK_TIMEOUT_MS = 2_000;
/**
 * How long an idle connection from the host's proxy stays open. The proxy retires its idle connections after 4 s
 * (UPSTREAM_IDLE_MS in apps/server); node's default of 5 s left a margin of one second, and a message the proxy
 * wrote to a connection as this side closed it was lost (502). Only the host reaches this socket.
 */
const BACKEND_KEEP_ALIVE_MS = 15_000;

export interface BackendOptions {
  /** Unix socket to listen on; a stale socket file there is removed first. */
  socketPath: string;
  /** Directory of thread.jsonl. */
  threadDir: string;
  /** The worktree the agent works in. */
  workspaceDir: string;
  slug: string;
  /** A provider name, or a Provider object (tests inject their own). */
  provider: ProviderName | Provider;
  /** The project's agent config (GROVE_AGENT_CONFIG); `command` needs it. */
  agent?: AgentConfig;
  /** The environment agent CLIs inherit (the backend's own, without GROVE_* variables). */
  agentEnv?: Record<string, string>;
  /** ANTHROPIC_BASE_URL for agents: the in-sandbox relay to the host's provider relay. */
  relayUrl?: string;
  /** The claude executable (default `claude` on PATH; tests use a fake). */
  claudeBinary?: string;
  /** SIGINT -> SIGKILL delay when a turn is cancelled (default 5 s). */
  cancelGraceMs?: number;
  /**
   * The host's after-turn hook (/run/grove/host.sock): called when a turn's agent is done, before
   * turn_end, so guardrails run while the workspace is still busy. Absent socket file: skipped.
   */
  hostHookSocket?: string;
  hostHookTimeoutMs?: number;
  logger?: Logger;
  /** Pause between streamed chunks of the scripted provider (default 25). */
  scriptedDelayMs?: number;
  /** Largest accepted request body (default 1 MiB). */
  maxBodyBytes?: number;
  /** How long close() lets an aborted turn wind down before closing the thread anyway (default 5 s). */
  shutdownGraceMs?: number;
  /** Ports /preview/<port>/ may reach inside the container (default 1024-65535). */
  previewPorts?: readonly PortRange[];
  /** The egress relay's port (default 3128): the backend's own, so never previewed. */
  egressPort?: number;
  /** The credential relay's port (default PROVIDER_RELAY_PORT, 3129): the backend's own too, never previewed. */
  providerRelayPort?: number;
  /**
   * The sandbox's agent user (GROVE_AGENT_UID/GID): agent processes and their file writes run as it, and the
   * socket is the backend's alone (0600). Absent: agents run as the backend and the socket is 0666.
   */
  agentUser?: AgentUser | null;
  /** The grove-pty helper the workspace terminals run on (default /opt/grove/grove-pty). */
  ptyHelper?: string;
}

export interface Backend {
  /** Opens (and repairs) the thread, then listens on the socket. */
  listen(): Promise<void>;
  /** Stops accepting, cancels the running turn, lets in-flight appends finish, closes every socket. Idempotent. */
  close(): Promise<void>;
}

interface RunningTurn {
  turn: string;
  controller: AbortController;
  done: Promise<void>;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<void> | void;

export function createBackend(options: BackendOptions): Backend {
  const logger = (options.logger ?? silentLogger).child({ slug: options.slug });
  const provider =
    typeof options.provider === 'string'
      ? createProvider(options.provider, {
          scriptedDelayMs: options.scriptedDelayMs ?? 25,
          agent: options.agent,
          threadDir: options.threadDir,
          baseEnv: options.agentEnv,
          relayUrl: options.relayUrl,
          claudeBinary: options.claudeBinary,
          graceMs: options.cancelGraceMs,
          agentUser: options.agentUser ?? null,
          logger,
        })
      : options.provider;
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const startedAt = Date.now();

  let store: ThreadStore | null = null;
  let userTurns = 0;
  /** The turn that makes the backend busy: set when its user line is accepted, cleared by its turn_end line. */
  let busyTurn: string | null = null;
  let running: RunningTurn | null = null;
  /** Set by the host (POST /hold) while it changes the worktree, e.g. for an undo: no turn may start. */
  let hold: { id: string; reason: string; until: number } | null = null;
  const activeHold = () => (hold !== null && Date.now() < hold.until ? hold : null);
  let started = false;
  let closing: Promise<void> | null = null;

  const hub = new StreamHub({ logger, hello: () => ({ type: 'hello', lastSeq: store?.lastSeq() ?? -1, busy: busyTurn !== null }) });
  const preview = createPreview({
    allow: options.previewPorts ?? DEFAULT_PREVIEW_PORTS,
    reserved: new Set([options.egressPort ?? 3128, options.providerRelayPort ?? PROVIDER_RELAY_PORT]),
    slug: options.slug,
    logger,
  });

  const terminals = createTerminals({
    helperPath: options.ptyHelper ?? DEFAULT_PTY_HELPER,
    workspaceDir: options.workspaceDir,
    user: options.agentUser ?? null,
    env: options.agentEnv ?? {},
    maxBodyBytes,
    logger,
  });

  // The Files view's reads, as the agent's user (see files.ts).
  const files = createFilesReader({ workspaceDir: options.workspaceDir, user: options.agentUser ?? null });
  const queryOf = (req: IncomingMessage): Record<string, string> => Object.fromEntries(new URL(req.url ?? '/', 'http://backend').searchParams);

  const openStore = (): ThreadStore => {
    if (store === null) throw new GroveError('invalid_state', 'the backend is not listening yet');
    return store;
  };

  /** Runs for every line, synchronously, right after it is durable and before anyone hears of it. */
  const onLine = (line: ThreadLine): void => {
    if (line.kind === 'user') userTurns++;
    // Cleared here rather than after `await append` so a client that sees turn_end can post at once.
    if (line.kind === 'turn_end' && line.turn === busyTurn) busyTurn = null;
    hub.broadcast({ type: 'line', line });
  };

  const routes: Record<string, Handler> = {
    'GET /health': (_req, res) => {
      sendJson(res, 200, { ok: true, slug: options.slug, provider: provider.name } satisfies BackendHealth);
    },
    'GET /thread': (_req, res) => {
      sendJson(res, 200, { lines: openStore().lines() } satisfies ThreadResponse);
    },
    'GET /ports': async (_req, res) => {
      sendJson(res, 200, { ports: await listeningPorts(preview) } satisfies PortsResponse);
    },
    'GET /files/tree': async (req, res) => {
      sendJson(res, 200, await files.read('tree', queryOf(req)));
    },
    'GET /files/content': async (req, res) => {
      sendJson(res, 200, await files.read('content', queryOf(req)));
    },
    'GET /status': (_req, res) => {
      const thread = openStore();
      sendJson(res, 200, {
        slug: options.slug,
        provider: provider.name,
        busy: busyTurn !== null,
        currentTurn: busyTurn,
        lines: thread.lastSeq() + 1,
        lastSeq: thread.lastSeq(),
        agentSessionId: provider.sessionId?.() ?? null,
        uptimeMs: Date.now() - startedAt,
      } satisfies BackendStatus);
    },
    'POST /messages': async (req, res) => {
      const body = parseOrThrow(postMessageRequestSchema, await readJsonBody(req, maxBodyBytes), { what: 'message' });
      if (closing) throw new GroveError('invalid_state', 'the backend is shutting down');
      if (busyTurn !== null) throw new GroveError('invalid_state', 'a turn is already running in this workspace');
      const held = activeHold();
      if (held) throw new GroveError('invalid_state', `the workspace is busy (${held.reason}); try again in a moment`);
      const thread = openStore();
      const turnNumber = userTurns + 1;
      const turn = `turn-${turnNumber}`;
      // Claimed before the first await, so a second request in the same instant sees busy.
      busyTurn = turn;
      let userLine: ThreadLine;
      try {
        userLine = await thread.append({ kind: 'user', turn, text: body.text });
      } catch (err) {
        busyTurn = null;
        throw err;
      }
      // Shutdown began while the line was being written: it is durable, and the next start closes
      // the turn as failed (closeDanglingTurn); starting it now would race the store closing.
      if (closing) logger.warn({ turn }, 'accepted a message during shutdown; its turn will not run');
      else startTurn({ turn, turnNumber, text: body.text });
      sendJson(res, 202, { turn, seq: userLine.seq } satisfies PostMessageResponse);
    },
    // The stop button: aborts the running turn through the provider's AbortSignal. The turn's own
    // run() then appends turn_end 'cancelled', exactly as close() does, so clients see one path.
    'POST /turn/cancel': (req, res) => {
      req.resume(); // no body is expected; drain any so the connection can be reused
      const turn = running;
      if (closing || turn === null || busyTurn !== turn.turn) throw new GroveError('invalid_state', 'no turn is running in this workspace');
      // A second click while the turn winds down is the same request, not an error.
      if (!turn.controller.signal.aborted) {
        logger.info({ turn: turn.turn }, 'turn cancel requested');
        turn.controller.abort(new GroveError('invalid_state', 'the turn was cancelled'));
      }
      sendJson(res, 202, { turn: turn.turn } satisfies CancelTurnResponse);
    },
    // Host-only routes (docs/agents.md): the host holds the workspace while it restores files, and
    // appends its own markers (undo) to the thread as raw lines from provider "grove".
    'POST /hold': async (req, res) => {
      const body = parseOrThrow(holdRequestSchema, await readJsonBody(req, maxBodyBytes), { what: 'hold' });
      if (busyTurn !== null) throw new GroveError('invalid_state', 'a turn is running in this workspace; cancel it or wait for it to end');
      if (activeHold()) throw new GroveError('invalid_state', `the workspace is already held (${hold?.reason ?? ''})`);
      hold = { id: randomUUID(), reason: body.reason, until: Date.now() + body.ttlMs };
      sendJson(res, 200, { hold: hold.id } satisfies HoldResponse);
    },
    'POST /hold/release': async (req, res) => {
      const body = parseOrThrow(releaseHoldRequestSchema, await readJsonBody(req, maxBodyBytes), { what: 'hold release' });
      const released = hold?.id === body.hold;
      if (released) hold = null;
      sendJson(res, 200, { released });
    },
    'POST /notes': async (req, res) => {
      const body = parseOrThrow(noteRequestSchema, await readJsonBody(req, maxBodyBytes), { what: 'note' });
      const line = await openStore().append({ kind: 'raw', turn: body.turn, provider: GROVE_LINE_PROVIDER, event: body.event });
      sendJson(res, 201, { seq: line.seq });
    },
  };

  /** Asks the host to check the turn's changes; what it did becomes grove lines of the turn. */
  const afterTurn = async (turn: string, status: TurnOutcomeStatus, error: string | null, log: Logger): Promise<void> => {
    if (!options.hostHookSocket) return;
    const report: TurnEndedRequest = {
      turn,
      status,
      ...(error !== null ? { error: error.slice(0, TURN_REPORT_ERROR_MAX) } : {}),
      // Every provider's agent is done with a completed turn and waits for the next message.
      waitingForUser: status === 'completed',
    };
    if (closing) {
      // Shutting down: the host only records that the turn was cut (so no dashboard thinks it still runs),
      // briefly, since the stop is waiting for this; nothing is appended to a thread that is closing.
      const cut = await notifyTurnEnded({ socketPath: options.hostHookSocket, body: { ...report, shutdown: true, waitingForUser: false }, timeoutMs: SHUTDOWN_HOOK_TIMEOUT_MS });
      if (cut.kind === 'failed') log.warn({ reason: cut.message }, 'the host did not take the report of the cut turn');
      return;
    }
    const outcome = await notifyTurnEnded({ socketPath: options.hostHookSocket, body: report, timeoutMs: options.hostHookTimeoutMs });
    if (outcome.kind === 'absent') return;
    const events: GroveThreadEvent[] = outcome.kind === 'done' ? outcome.events : [{ type: 'host_unavailable', message: outcome.message }];
    if (outcome.kind === 'failed') log.warn({ reason: outcome.message }, 'the host did not run its after-turn checks');
    for (const event of events) {
      await openStore()
        .append({ kind: 'raw', turn, provider: GROVE_LINE_PROVIDER, event })
        .catch((err: unknown) => log.error({ err }, 'could not record what the host did after the turn'));
    }
  };

  const startTurn = (args: { turn: string; turnNumber: number; text: string }): void => {
    const { turn } = args;
    const controller = new AbortController();
    let ended = false;
    // The turn's last error line: a failed turn's report carries it.
    let lastError: string | null = null;
    const ctx: TurnContext = {
      turn,
      turnNumber: args.turnNumber,
      workspaceDir: options.workspaceDir,
      signal: controller.signal,
      emitDelta: (text) => {
        if (ended || controller.signal.aborted || text === '') return;
        hub.broadcast({ type: 'delta', turn, text });
      },
      appendLine: (line: ProviderLine) => {
        if (ended) return Promise.reject(new GroveError('invalid_state', `turn ${turn} has already ended`));
        const kind = (line as { kind: string }).kind;
        if (kind === 'user' || kind === 'turn_end') {
          return Promise.reject(new GroveError('internal', `a provider may not append a ${kind} line`));
        }
        if (line.kind === 'error') lastError = line.message;
        return openStore().append({ ...line, turn });
      },
    };

    const run = async (): Promise<void> => {
      const log = logger.child({ turn });
      log.info({ provider: provider.name }, 'turn started');
      let status: TurnOutcomeStatus;
      try {
        const outcome = await provider.runTurn(args.text, ctx);
        status = controller.signal.aborted ? 'cancelled' : outcome?.status === 'failed' ? 'failed' : 'completed';
      } catch (err) {
        if (controller.signal.aborted) {
          status = 'cancelled';
        } else {
          status = 'failed';
          log.error({ err }, 'provider failed');
          const message = `the ${provider.name} provider failed: ${err instanceof Error ? err.message : String(err)}`;
          lastError = message;
          await openStore()
            .append({ kind: 'error', turn, message })
            .catch((appendErr: unknown) => log.error({ err: appendErr }, 'could not record the provider failure'));
        }
      }
      ended = true;
      await afterTurn(turn, status, status === 'failed' ? lastError : null, log).catch((err: unknown) => log.error({ err }, 'after-turn hook failed'));
      try {
        await openStore().append({ kind: 'turn_end', turn, status });
        log.info({ status }, 'turn ended');
      } catch (err) {
        log.error({ err, status }, 'could not append turn_end');
      } finally {
        if (busyTurn === turn) busyTurn = null;
        if (running?.turn === turn) running = null;
      }
    };
    running = { turn, controller, done: run() };
  };

  /** A turn without turn_end means the previous process died mid-turn; close it so clients do not wait forever. */
  const closeDanglingTurn = async (thread: ThreadStore): Promise<void> => {
    const last = thread.lines().at(-1);
    if (last === undefined || last.kind === 'turn_end') return;
    logger.warn({ turn: last.turn, lastSeq: last.seq }, 'the previous backend stopped mid-turn; marking that turn failed');
    await thread.append({ kind: 'error', turn: last.turn, message: 'the backend stopped before this turn finished' });
    await thread.append({ kind: 'turn_end', turn: last.turn, status: 'failed' });
  };

  const server = createServer((req, res) => {
    if (preview.matches(req.url ?? '/')) {
      preview.handle(req, res);
      return;
    }
    const pathname = new URL(req.url ?? '/', 'http://backend').pathname;
    if (terminals.matches(pathname)) {
      terminals.handle(req, res);
      return;
    }
    const handler = routes[`${req.method ?? ''} ${pathname}`];
    const handle = async () => {
      if (!handler) throw new GroveError('not_found', `no route for ${req.method ?? '?'} ${pathname}`);
      await handler(req, res);
    };
    handle().catch((err: unknown) => sendError({ req, res, err, logger }));
  });
  server.keepAliveTimeout = BACKEND_KEEP_ALIVE_MS;
  server.on('upgrade', (req, socket, head) => {
    if (preview.matches(req.url ?? '/')) preview.upgrade(req, socket, head);
    else if (terminals.matches(new URL(req.url ?? '/', 'http://backend').pathname)) terminals.upgrade(req, socket, head);
    else hub.handleUpgrade(req, socket, head);
  });

  return {
    async listen() {
      if (started || closing) throw new GroveError('invalid_state', 'listen() was already called, or the backend was closed');
      started = true;
      const thread = await openThreadStore({ threadDir: options.threadDir, logger });
      store = thread;
      try {
        userTurns = thread.lines().filter((l) => l.kind === 'user').length;
        thread.onLine(onLine);
        await closeDanglingTurn(thread);
        await prepareSocketPath(options.socketPath, logger);
        await new Promise<void>((resolve, reject) => {
          server.once('error', reject);
          server.listen(options.socketPath, () => {
            server.off('error', reject);
            resolve();
          });
        });
        // In a sandbox the run dir is root's (0700) and so is this socket: the agent's user can neither reach,
        // unlink nor replace it. Outside one (tests, a dev backend) access control is the directory's.
        await chmod(options.socketPath, options.agentUser ? 0o600 : 0o666);
      } catch (err) {
        await thread.close();
        throw err;
      }
      logger.info({ socket: options.socketPath, provider: provider.name, lines: thread.lastSeq() + 1 }, 'backend listening');
    },

    close() {
      closing ??= (async () => {
        logger.info({ busy: busyTurn !== null }, 'backend closing');
        const stopped = server.listening ? new Promise<void>((resolve) => server.close(() => resolve())) : Promise.resolve();
        server.closeIdleConnections();
        const turn = running;
        if (turn) {
          turn.controller.abort(new GroveError('invalid_state', 'the backend is shutting down'));
          const settled = await settlesWithin(turn.done, options.shutdownGraceMs ?? 5000);
          if (!settled) logger.warn({ turn: turn.turn }, 'the turn did not stop in time; closing the thread anyway');
        }
        await terminals.close();
        await store?.close();
        await hub.close();
        preview.close();
        server.closeAllConnections();
        await stopped;
        logger.info({}, 'backend closed');
      })();
      return closing;
    },
  };
}

/** Removes a socket file left by a dead backend; refuses to touch anything else, or a socket someone still serves. */
async function prepareSocketPath(socketPath: string, logger: Logger): Promise<void> {
  await mkdir(dirname(socketPath), { recursive: true });
  const stat = await lstat(socketPath).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (stat === null) return;
  if (!stat.isSocket()) throw new GroveError('invalid_state', `${socketPath} exists and is not a socket; refusing to replace it`);
  if (await socketAnswers(socketPath)) throw new GroveError('invalid_state', `another process is already listening on ${socketPath}`);
  await unlink(socketPath);
  logger.info({ socket: socketPath }, 'removed a stale socket file');
}

function socketAnswers(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = connect(socketPath);
    const done = (answer: boolean) => {
      probe.destroy();
      resolve(answer);
    };
    probe.once('connect', () => done(true));
    probe.once('error', () => done(false));
    // A listener that does not even complete a local connect in a second counts as alive: never steal its path.
    probe.setTimeout(1000, () => done(true));
  });
}

async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
