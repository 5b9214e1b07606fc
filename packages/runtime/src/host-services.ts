import { chmod, chown } from 'node:fs/promises';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { HOST_HOOK_SOCKET, PROVIDER_RELAY_SOCKET, isGroveError, turnEndedRequestSchema } from '@grove/contracts';
import type { TurnEndedRequest, TurnEndedResponse } from '@grove/contracts';
import type { Logger } from 'pino';
import { createBoundedServer, createProviderRelay, removeStaleSocket } from '@grove/egress';
import type { ListenerLimits, ProviderRelay, RelayRecord } from '@grove/egress';

/**
 * The host's per-workspace listeners that the sandbox reaches through its run dir (mounted at
 * /run/grove): host.sock, where the backend reports each finished turn and waits for the
 * after-turn work, and provider.sock, the credential relay. They run in the server process, are
 * started before the container so they are there when the backend starts, and stopped with it.
 */
export interface HostServicesOptions {
  logger: Logger;
  /** Directory of a slug's sockets on the host: <home>/run/<slug>. */
  runDir(slug: string): string;
  /** The after-turn work: reverts, snapshot. Its answer is appended to the thread by the backend. */
  onTurnEnded(slug: string, req: TurnEndedRequest): Promise<TurnEndedResponse>;
  /** The relay's upstream and key; absent: no provider.sock (the agent's API calls then fail with 502 inside). */
  providerRelay?: { upstream: URL; apiKey: string | null; onRequest?: (record: RelayRecord) => void; limits?: Partial<ListenerLimits> };
  socketOwner?: { uid: number; gid: number };
  /** Bounds on host.sock (tests shorten them); defaults: HOOK_LIMITS. */
  hookLimits?: Partial<ListenerLimits>;
}

/**
 * host.sock is per workspace and only its backend has reason to call it, one turn report at a time, so
 * these are generous for that and tight for a sandbox that opens connections by the thousand. The
 * after-turn work itself is not bounded here (the answer may take a while on a big worktree; the
 * backend has its own bound); receiving the request is.
 */
export const HOOK_LIMITS: ListenerLimits = { maxConnections: 16, maxInFlight: 4, headersTimeoutMs: 10_000, requestTimeoutMs: 30_000, idleTimeoutMs: 5_000 };

interface Listeners {
  hook: Server;
  hookSockets: Set<Socket>;
  relay: ProviderRelay | null;
}

const MAX_BODY = 64 * 1024;

export class HostServices {
  private readonly running = new Map<string, Promise<Listeners>>();

  constructor(private readonly opts: HostServicesOptions) {}

  /** Listens for the slug (idempotent). Stale socket files from an earlier process are replaced. */
  ensure(slug: string): Promise<void> {
    let entry = this.running.get(slug);
    if (!entry) {
      entry = this.start(slug);
      this.running.set(slug, entry);
      entry.catch(() => {
        if (this.running.get(slug) === entry) this.running.delete(slug);
      });
    }
    return entry.then(() => undefined);
  }

  has(slug: string): boolean {
    return this.running.has(slug);
  }

  async close(slug: string): Promise<void> {
    const entry = this.running.get(slug);
    if (!entry) return;
    this.running.delete(slug);
    const listeners = await entry.catch(() => null);
    if (!listeners) return;
    for (const s of listeners.hookSockets) s.destroy();
    await Promise.all([new Promise<void>((resolve) => listeners.hook.close(() => resolve())), listeners.relay?.close()]);
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.running.keys()].map((slug) => this.close(slug)));
  }

  private async start(slug: string): Promise<Listeners> {
    const dir = this.opts.runDir(slug);
    const log = this.opts.logger.child({ slug, component: 'host-services' });
    const hookPath = join(dir, HOST_HOOK_SOCKET);
    await removeStaleSocket(hookPath);
    const { server: hook, sockets: hookSockets } = createBoundedServer({
      name: 'host.sock',
      limits: { ...HOOK_LIMITS, ...this.opts.hookLimits },
      logger: log,
      handler: (req, res) => void this.handleHook(slug, req, res, log),
      refuse: (_req, res, why) => replyJson(res, 429, { code: 'capacity_reached', message: why }),
    });
    await listenOn(hook, hookPath);
    await this.restrict(hookPath);

    let relay: ProviderRelay | null = null;
    if (this.opts.providerRelay) {
      relay = createProviderRelay({
        slug,
        socketPath: join(dir, PROVIDER_RELAY_SOCKET),
        upstream: this.opts.providerRelay.upstream,
        apiKey: this.opts.providerRelay.apiKey,
        onRequest: this.opts.providerRelay.onRequest,
        ...(this.opts.providerRelay.limits ? { limits: this.opts.providerRelay.limits } : {}),
        socketOwner: this.opts.socketOwner,
        logger: this.opts.logger,
      });
      try {
        await relay.listen();
      } catch (err) {
        hook.close();
        throw err;
      }
    }
    log.debug({ dir, relay: relay !== null }, 'host services listening');
    return { hook, hookSockets, relay };
  }

  private async restrict(path: string): Promise<void> {
    const owner = this.opts.socketOwner;
    if (!owner) {
      await chmod(path, 0o666);
      return;
    }
    await chown(path, owner.uid, owner.gid).then(
      () => chmod(path, 0o660),
      () => chmod(path, 0o666),
    );
  }

  private async handleHook(slug: string, req: IncomingMessage, res: ServerResponse, log: Logger): Promise<void> {
    const reply = (status: number, body: unknown): void => replyJson(res, status, body);
    if (req.method !== 'POST' || req.url !== '/turn-ended') {
      req.resume();
      reply(404, { code: 'not_found', message: 'the host hook only answers POST /turn-ended' });
      return;
    }
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > MAX_BODY) {
      // Refused before a byte of it is read; the connection goes too, its body is not drained.
      res.shouldKeepAlive = false;
      reply(413, { code: 'invalid_input', message: `the turn report is over ${MAX_BODY} bytes` });
      return;
    }
    let body: unknown;
    try {
      body = JSON.parse(await readBody(req));
    } catch (err) {
      reply(422, { code: 'invalid_input', message: `the turn report is not JSON: ${err instanceof Error ? err.message : String(err)}` });
      return;
    }
    const parsed = turnEndedRequestSchema.safeParse(body);
    if (!parsed.success) {
      reply(422, { code: 'invalid_input', message: `invalid turn report: ${parsed.error.message}` });
      return;
    }
    try {
      reply(200, await this.opts.onTurnEnded(slug, parsed.data));
    } catch (err) {
      log.error({ err, turn: parsed.data.turn }, 'after-turn work failed');
      const code = isGroveError(err) ? err.code : 'internal';
      reply(500, { code, message: err instanceof Error ? err.message : String(err) });
    }
  }
}

function replyJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function listenOn(server: Server, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(new Error('body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
