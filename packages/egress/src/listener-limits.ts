// Bounds for an HTTP listener that a sandbox can reach (host.sock, provider.sock). Whatever is on the other
// end runs as, or next to, the agent: every resource it can make the host hold is capped.
import { createServer } from 'node:http';
import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';

export interface ListenerLimits {
  /** Open connections at once; one more is closed as soon as it is accepted. */
  maxConnections: number;
  /** Requests being handled at once (over all connections, pipelined ones included); one more is refused. */
  maxInFlight: number;
  /** From the connection's first byte (or its accept) to the end of the request head. */
  headersTimeoutMs: number;
  /** From the start of a request to the end of its body. The answer is not bounded by this. */
  requestTimeoutMs: number;
  /** A kept-alive connection with no request on it is closed after this. */
  idleTimeoutMs: number;
}

export interface BoundedServer {
  server: Server;
  /** Every open connection, for close(). */
  sockets: Set<Socket>;
  inFlight(): number;
}

/** How often the over-cap log line may repeat: one line per window, with the count it stands for. */
const DROP_LOG_WINDOW_MS = 10_000;

/**
 * An HTTP server with the limits applied. `refuse` answers a request over maxInFlight (the listener's own
 * JSON error shape); over maxConnections, the connection is closed by Node before any byte is read.
 */
export function createBoundedServer(o: {
  name: string;
  limits: ListenerLimits;
  logger: Logger;
  handler: RequestListener;
  refuse: (req: IncomingMessage, res: ServerResponse, why: string) => void;
}): BoundedServer {
  const { limits, logger } = o;
  const sockets = new Set<Socket>();
  let inFlight = 0;
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.idleTimeoutMs,
      // Node checks the header and request deadlines on this interval (30 s by default, which would let a
      // 10 s deadline run to 40 s): check often enough that a deadline is a deadline.
      connectionsCheckingInterval: Math.max(25, Math.min(1_000, ...[limits.headersTimeoutMs, limits.requestTimeoutMs].filter((ms) => ms > 0).map((ms) => Math.floor(ms / 4)))),
      insecureHTTPParser: false,
    },
    (req, res) => {
      if (inFlight >= limits.maxInFlight) {
        req.resume();
        // The connection goes with the refusal: a client that floods one socket with pipelined requests
        // gets no further.
        res.shouldKeepAlive = false;
        throttled(`${o.name}: over ${limits.maxInFlight} requests in flight, refused`);
        o.refuse(req, res, `${o.name} is already handling ${limits.maxInFlight} requests; try again when one finished`);
        return;
      }
      inFlight++;
      let done = false;
      res.on('close', () => {
        if (done) return;
        done = true;
        inFlight--;
      });
      o.handler(req, res);
    },
  );
  server.maxConnections = limits.maxConnections;
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });

  let windowStart = 0;
  let suppressed = 0;
  const throttled = (msg: string): void => {
    const now = Date.now();
    if (now - windowStart < DROP_LOG_WINDOW_MS) {
      suppressed++;
      return;
    }
    logger.warn({ listener: o.name, suppressedSinceLast: suppressed }, msg);
    windowStart = now;
    suppressed = 0;
  };
  // Malformed framing (both Content-Length and Transfer-Encoding, two lengths, a bad chunk), an oversized head,
  // a head or body past its deadline: Node's parser refuses it before any handler runs; the answer says why.
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    const timedOut = err.code === 'ERR_HTTP_REQUEST_TIMEOUT';
    const status = timedOut ? 408 : err.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
    const message = timedOut
      ? `grove ${o.name}: the request did not arrive in time (head ${limits.headersTimeoutMs} ms, whole request ${limits.requestTimeoutMs} ms)`
      : `grove ${o.name}: malformed request (${err.code ?? 'parse error'})`;
    const body = JSON.stringify({ code: 'invalid_input', rule: timedOut ? 'request-timeout' : 'invalid-request', message });
    throttled(message);
    socket.end(`HTTP/1.1 ${status} ${timedOut ? 'Request Timeout' : 'Bad Request'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
    socket.destroySoon();
  });
  // Node closes a connection over maxConnections itself and says so with 'drop' (no data is read from it).
  server.on('drop', () => throttled(`${o.name}: over ${limits.maxConnections} connections, new ones closed`));
  return { server, sockets, inFlight: () => inFlight };
}
