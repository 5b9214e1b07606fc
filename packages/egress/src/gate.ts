/**
 * The egress gate of one workspace: an HTTP proxy on a Unix socket (CONNECT tunnels and plain-HTTP
 * forwarding) that decides on the host. Order of a decision, cheapest and safest first:
 *   1. parse the target; invalid or ambiguous hosts are refused;
 *   2. IP literals (any notation, normalized) are allowed only when a rule names the address, or the
 *      address is public and an IP rule names it; hostnames must match a rule *before* anything is
 *      resolved (so a sandbox cannot use DNS lookups of arbitrary names as a channel);
 *   3. the name is resolved here, and every address it resolves to must be public or named by a rule;
 *   4. the connection goes to an address checked in step 3 (never a second lookup, so DNS rebinding
 *      cannot swap it), within a bounded connect timeout and a per-workspace tunnel limit.
 * Every decision, allowed or denied, reaches the audit callback once (allowed ones when they close,
 * with bytes each way).
 * This file holds the server, its socket and the CONNECT and plain-HTTP handling; the decision (steps 1-3)
 * and the audit record are in decision.ts, step 4's connect in upstream.ts, the HTTP framing in wire.ts.
 */
import { chmod, chown, lstat, unlink } from 'node:fs/promises';
import { createServer, request as httpRequest } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { EgressDecision, EgressPolicy } from '@grove/contracts';
import { hostPort, parseHost } from './address.ts';
import type { ParsedHost } from './address.ts';
import { auditRecord, decide, deny, messageOf, stillAllowed } from './decision.ts';
import type { Allow, Deny, Outcome, Verdict } from './decision.ts';
import { systemResolver } from './resolver.ts';
import type { Resolver } from './resolver.ts';
import { openUpstream, tcpConnector } from './upstream.ts';
import type { Connector } from './upstream.ts';
import { forwardHeaders, hostKey, responseHeaders, splitAuthority, writeHttpDeny, writeRawDeny } from './wire.ts';

export { splitAuthority } from './wire.ts';
export type { Connector, ConnectTarget } from './upstream.ts';

export type AuditSink = (decision: EgressDecision) => void;

export interface GateOptions {
  slug: string;
  /** Where to listen: <home>/run/<slug>/egress.sock, seen in the sandbox as /run/grove/egress.sock. */
  socketPath: string;
  policy: EgressPolicy;
  /** Called once per decision; must not throw (errors are swallowed and reported to onError). */
  audit: AuditSink;
  resolver?: Resolver;
  connect?: Connector;
  /** Bound on resolving a name. Default 5 s. */
  resolveTimeoutMs?: number;
  /** Bound on establishing the upstream TCP connection. Default 10 s. */
  connectTimeoutMs?: number;
  /** Open tunnels plus in-flight forwarded requests at once. Default 64. */
  maxTunnels?: number;
  /** A tunnel or forwarded request idle this long is closed. Default 10 min (streams from model APIs idle for a while). */
  idleTimeoutMs?: number;
  /** How long a client may take to send a request head. Default 10 s. */
  headersTimeoutMs?: number;
  /**
   * The sandbox user that must be able to connect. When the gate may chown (root), the socket becomes
   * owner:group 0660; otherwise it is 0666 and the run directory (mounted only into this workspace's
   * container) is what keeps others out.
   */
  socketOwner?: { uid: number; gid: number };
  onError?: (err: unknown, context: string) => void;
}

export interface Gate {
  readonly slug: string;
  readonly socketPath: string;
  listen(): Promise<void>;
  /** Stops accepting and cuts every open tunnel (each still produces its audit record). Idempotent. */
  close(): Promise<void>;
  policy(): EgressPolicy;
  /** Applies at once: new requests see the new policy, and open tunnels it no longer allows are closed. */
  setPolicy(policy: EgressPolicy): void;
  /** Open tunnels and in-flight forwarded requests. */
  active(): number;
}

interface Tunnel {
  host: ParsedHost;
  port: number;
  address: string;
  kill(): void;
}

const DEFAULTS = { resolveTimeoutMs: 5_000, connectTimeoutMs: 10_000, maxTunnels: 64, idleTimeoutMs: 600_000, headersTimeoutMs: 10_000 };

class GateImpl implements Gate {
  readonly slug: string;
  readonly socketPath: string;
  private current: EgressPolicy;
  private readonly server: Server;
  private readonly resolver: Resolver;
  private readonly connector: Connector;
  private readonly o: typeof DEFAULTS;
  private readonly clients = new Set<Duplex>();
  private readonly tunnels = new Set<Tunnel>();
  private inUse = 0;
  private closing: Promise<void> | null = null;

  constructor(private readonly opts: GateOptions) {
    this.slug = opts.slug;
    this.socketPath = opts.socketPath;
    this.current = opts.policy;
    this.resolver = opts.resolver ?? systemResolver;
    this.connector = opts.connect ?? tcpConnector;
    this.o = {
      resolveTimeoutMs: opts.resolveTimeoutMs ?? DEFAULTS.resolveTimeoutMs,
      connectTimeoutMs: opts.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs,
      maxTunnels: opts.maxTunnels ?? DEFAULTS.maxTunnels,
      idleTimeoutMs: opts.idleTimeoutMs ?? DEFAULTS.idleTimeoutMs,
      headersTimeoutMs: opts.headersTimeoutMs ?? DEFAULTS.headersTimeoutMs,
    };
    // Node enforces headersTimeout only when it sweeps its connections, every 30 s by default: a 10 s
    // header timeout would let a silent client hold its connection for up to 40 s. Sweep often enough
    // that the timeout is what it says.
    this.server = createServer({ connectionsCheckingInterval: Math.max(25, Math.min(1_000, Math.floor(this.o.headersTimeoutMs / 4))) });
    this.server.headersTimeout = this.o.headersTimeoutMs;
    // Plain-HTTP bodies may stream for long; the idle timeout below bounds a stalled one instead.
    this.server.requestTimeout = 0;
    this.server.timeout = this.o.idleTimeoutMs;
    // Idle client connections cost a file descriptor each: bound them too.
    this.server.maxConnections = this.o.maxTunnels * 2 + 16;
    this.server.on('connection', (s: Socket) => {
      this.clients.add(s);
      s.on('close', () => this.clients.delete(s));
    });
    this.server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      socket.on('error', () => undefined);
      this.onConnect(req, socket as Socket, head).catch((e: unknown) => this.fail(e, 'CONNECT', socket));
    });
    this.server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      this.onRequest(req, res).catch((e: unknown) => this.fail(e, 'HTTP', res.socket));
    });
    this.server.on('upgrade', (req: IncomingMessage, socket: Duplex) => {
      socket.on('error', () => undefined);
      const d = deny(400, 'invalid-target', 'protocol upgrades through the plain-HTTP proxy are not supported; use CONNECT');
      this.record({ method: 'HTTP', host: req.headers.host ?? '', port: 0, verdict: d, started: Date.now() });
      writeRawDeny(socket, d, req.headers.host ?? '', 0);
    });
    this.server.on('clientError', (_err: Error, socket: Duplex) => {
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
      socket.destroy();
    });
  }

  policy(): EgressPolicy {
    return this.current;
  }

  active(): number {
    return this.inUse;
  }

  setPolicy(policy: EgressPolicy): void {
    this.current = policy;
    for (const t of [...this.tunnels]) if (!stillAllowed(this.current, t)) t.kill();
  }

  async listen(): Promise<void> {
    await this.removeStaleSocket();
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.socketPath, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    const owner = this.opts.socketOwner;
    if (owner && process.getuid?.() === 0) {
      await chown(this.socketPath, owner.uid, owner.gid);
      await chmod(this.socketPath, 0o660);
    } else {
      await chmod(this.socketPath, 0o666);
    }
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      const closed = new Promise<void>((resolve) => {
        if (!this.server.listening) resolve();
        else this.server.close(() => resolve());
      });
      for (const t of [...this.tunnels]) t.kill();
      for (const c of [...this.clients]) c.destroy();
      await closed;
      await unlink(this.socketPath).catch(() => undefined);
    })();
    return this.closing;
  }

  // ---- decisions ----

  private decide(rawHost: string, port: number): Promise<Verdict> {
    return decide(this.current, rawHost, port, { resolver: this.resolver, resolveTimeoutMs: this.o.resolveTimeoutMs });
  }

  private reserve(): boolean {
    if (this.inUse >= this.o.maxTunnels) return false;
    this.inUse++;
    return true;
  }

  /** Connect to the checked addresses in order, within one overall connect deadline. */
  // ---- CONNECT ----

  private async onConnect(req: IncomingMessage, client: Socket, head: Buffer): Promise<void> {
    const started = Date.now();
    const target = splitAuthority(req.url ?? '', null);
    if ('error' in target) {
      const d = deny(400, 'invalid-target', `invalid CONNECT target "${req.url ?? ''}": ${target.error}`);
      this.record({ method: 'CONNECT', host: req.url ?? '', port: 0, verdict: d, started });
      writeRawDeny(client, d, req.url ?? '', 0);
      return;
    }
    const { host, port } = target;
    const verdict = await this.decide(host, port);
    if (!verdict.allow) {
      this.record({ method: 'CONNECT', host, port, verdict, started });
      writeRawDeny(client, verdict, host, port);
      return;
    }
    if (!this.reserve()) {
      const d = deny(429, 'tunnel-limit', `this workspace already has ${this.o.maxTunnels} connections open`);
      this.record({ method: 'CONNECT', host, port, verdict: d, started });
      writeRawDeny(client, d, host, port);
      return;
    }
    const upstream = await this.openAllowed({ method: 'CONNECT', host, port, verdict, started, client }, (d) => writeRawDeny(client, d, host, port));
    if (!upstream) return;
    const up = upstream.socket;
    const kill = (): void => {
      client.destroy();
      up.destroy();
    };
    const finish = this.hold({ host, port, address: upstream.address, kill }, () => {
      kill();
      this.record({ method: 'CONNECT', host, port, verdict, started, address: upstream.address, status: 200, bytesIn: up.bytesRead, bytesOut: up.bytesWritten });
    });
    up.on('error', () => undefined);
    client.on('close', finish);
    up.on('close', finish);
    for (const s of [client, up]) {
      s.setTimeout(this.o.idleTimeoutMs, () => finish());
      s.setNoDelay(true);
    }
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) up.write(head);
    client.pipe(up);
    up.pipe(client);
    if (client.destroyed) finish();
  }

  // ---- plain HTTP ----

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = Date.now();
    const url = req.url ?? '';
    const denyNow = (d: Deny, host: string, port: number): void => {
      this.record({ method: 'HTTP', host, port, verdict: d, started });
      writeHttpDeny(res, d, host, port);
      req.resume();
    };
    if (!/^http:\/\//i.test(url)) {
      const why = /^https:\/\//i.test(url)
        ? 'https through the proxy must use CONNECT'
        : url.startsWith('/')
          ? 'this is a proxy: send an absolute URL (GET http://host/path) or CONNECT host:port'
          : `unsupported request target "${url.slice(0, 100)}"`;
      denyNow(deny(400, 'invalid-target', why), req.headers.host ?? '', 0);
      return;
    }
    const rest = url.slice('http://'.length);
    const authority = rest.split(/[/?#]/, 1)[0] ?? '';
    let path = rest.slice(authority.length);
    if (path === '' || path.startsWith('?')) path = `/${path}`;
    path = path.split('#', 1)[0] ?? '/';
    const target = splitAuthority(authority, 80);
    if ('error' in target) {
      denyNow(deny(400, 'invalid-target', `invalid URL authority "${authority}": ${target.error}`), authority, 0);
      return;
    }
    const { host, port } = target;
    const given = req.headers.host;
    if (given !== undefined) {
      // An allowed URL with a Host header naming another site would let a virtual-hosting upstream (or a
      // CDN) serve the other site: the two must name the same host and port.
      const hh = splitAuthority(given, 80);
      const same = !('error' in hh) && hh.port === port && hostKey(parseHost(hh.host), hh.host) === hostKey(parseHost(host), host);
      if (!same) {
        denyNow(deny(403, 'host-header-mismatch', `the Host header "${given}" does not name the URL's host ${hostPort(host, port)}`), host, port);
        return;
      }
    }
    const verdict = await this.decide(host, port);
    if (!verdict.allow) {
      denyNow(verdict, host, port);
      return;
    }
    if (!this.reserve()) {
      denyNow(deny(429, 'tunnel-limit', `this workspace already has ${this.o.maxTunnels} connections open`), host, port);
      return;
    }
    const upstream = await this.openAllowed({ method: 'HTTP', host, port, verdict, started, client: req.socket }, (d) => {
      writeHttpDeny(res, d, host, port);
      req.resume();
    });
    if (!upstream) return;
    const sock = upstream.socket;
    let status = 502;
    let error: string | undefined;
    const headers = forwardHeaders(req.headers);
    headers.host = given ?? authority;
    // One upstream connection per request keeps the accounting (and the checked address) per decision.
    headers.connection = 'close';
    const up = httpRequest({ createConnection: () => sock, method: req.method, path, headers, setHost: false });
    const kill = (): void => {
      up.destroy();
      sock.destroy();
      res.destroy();
    };
    const finish = this.hold({ host, port, address: upstream.address, kill }, () => {
      sock.destroy();
      this.record({ method: 'HTTP', host, port, verdict, started, address: upstream.address, status, bytesIn: sock.bytesRead, bytesOut: sock.bytesWritten, error });
    });
    sock.setTimeout(this.o.idleTimeoutMs, () => {
      error = 'upstream idle timeout';
      kill();
    });
    up.on('response', (ur: IncomingMessage) => {
      status = ur.statusCode ?? 502;
      res.writeHead(status, ur.statusMessage, responseHeaders(ur.rawHeaders));
      ur.pipe(res);
      ur.on('error', () => res.destroy());
    });
    up.on('error', (e: Error) => {
      error = e.message;
      if (!res.headersSent) writeHttpDeny(res, deny(502, verdict.rule, `allowed, but the upstream failed: ${e.message}`), host, port);
      else res.destroy();
    });
    res.on('close', finish);
    req.pipe(up);
  }

  // ---- shared by CONNECT and plain HTTP ----

  /**
   * Connects to the address the verdict checked (never a second lookup). On failure the slot taken by
   * reserve() is given back, the attempt is audited as a 502 and `refuse` answers the client.
   */
  private async openAllowed(
    o: { method: 'CONNECT' | 'HTTP'; host: string; port: number; verdict: Allow; started: number; client: Socket },
    refuse: (d: Deny) => void,
  ): Promise<{ socket: Socket; address: string } | null> {
    try {
      return await openUpstream(o.verdict.addresses, o.port, o.client, { connector: this.connector, connectTimeoutMs: this.o.connectTimeoutMs });
    } catch (e) {
      this.inUse--;
      const reason = messageOf(e);
      const address = o.verdict.addresses[0]?.text ?? null;
      this.record({ method: o.method, host: o.host, port: o.port, verdict: o.verdict, started: o.started, address, status: 502, error: reason });
      refuse(deny(502, o.verdict.rule, `allowed, but the upstream could not be reached: ${reason}`, address));
      return null;
    }
  }

  /**
   * Registers an open connection so a policy change can cut it; the returned finish() runs `done`
   * once, when either side closes, and frees the connection's slot.
   */
  private hold(o: { host: string; port: number; address: string; kill: () => void }, done: () => void): () => void {
    const tunnel: Tunnel = { host: parseHost(o.host), port: o.port, address: o.address, kill: o.kill };
    this.tunnels.add(tunnel);
    let finished = false;
    return () => {
      if (finished) return;
      finished = true;
      this.inUse--;
      this.tunnels.delete(tunnel);
      done();
    };
  }

  // ---- audit ----

  private record(r: Outcome): void {
    try {
      this.opts.audit(auditRecord(this.slug, r));
    } catch (e) {
      this.opts.onError?.(e, 'audit callback threw');
    }
  }

  private fail(e: unknown, context: string, socket: Duplex | null): void {
    this.opts.onError?.(e, `gate ${context} handler failed`);
    socket?.destroy();
  }

  private async removeStaleSocket(): Promise<void> {
    try {
      const st = await lstat(this.socketPath);
      if (!st.isSocket()) throw new Error(`${this.socketPath} exists and is not a socket; refusing to replace it`);
      await unlink(this.socketPath);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
  }
}

export function createGate(opts: GateOptions): Gate {
  return new GateImpl(opts);
}
