// A warm sandbox's backend before its fork: it answers only GET /pool and POST /claim on its socket, and once the host
// has told it which workspace it is, it closes that listener and the ordinary backend takes the socket (main.ts).
import { createServer } from 'node:http';
import { chmod, mkdir, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { GroveError, parseOrThrow, poolClaimRequestSchema } from '@grove/contracts';
import type { PoolClaimResponse, PoolWaiting } from '@grove/contracts';
import { readJsonBody, sendError, sendJson } from './http.ts';
import type { Logger } from './logger.ts';

/** A claim is one slug: nothing bigger is read. */
const MAX_CLAIM_BYTES = 4096;

export interface PoolWaitOptions {
  pool: string;
  socketPath: string;
  logger: Logger;
  /** 0600 when the sandbox has an agent user (the socket is the backend's alone), else 0666 (tests). */
  socketMode: number;
}

/**
 * Listen on the socket until the host claims this sandbox; resolves with the slug it was given, after the listener is
 * closed and its socket file removed. Only the host reaches the socket (the run dir is root's, 0700) and no agent
 * process runs before the claim, but the body is checked all the same: one slug, nothing else.
 */
export async function waitForClaim(o: PoolWaitOptions): Promise<string> {
  const { logger } = o;
  let claimed: ((slug: string) => void) | null = null;
  const slug = new Promise<string>((resolve) => {
    claimed = resolve;
  });
  let taken = false;
  const server = createServer((req, res) => {
    void (async () => {
      try {
        if (req.method === 'GET' && req.url === '/pool') {
          sendJson(res, 200, { waiting: true, pool: o.pool } satisfies PoolWaiting);
          return;
        }
        if (req.method === 'POST' && req.url === '/claim') {
          if (taken) throw new GroveError('invalid_state', 'this warm sandbox was claimed already');
          const body = parseOrThrow(poolClaimRequestSchema, await readJsonBody(req, MAX_CLAIM_BYTES), { what: 'claim' });
          taken = true;
          // The answer first, then the listener goes: the host waits for /health as the slug next.
          res.once('finish', () => claimed?.(body.slug));
          sendJson(res, 202, { slug: body.slug } satisfies PoolClaimResponse);
          return;
        }
        throw new GroveError('backend_unavailable', 'this sandbox waits to be claimed by a fork');
      } catch (err) {
        sendError({ req, res, err, logger });
      }
    })();
  });
  await mkdir(dirname(o.socketPath), { recursive: true });
  // Left by nothing but an earlier run of this same sandbox: the run dir is made empty by the host.
  await rm(o.socketPath, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
  await chmod(o.socketPath, o.socketMode);
  logger.info({ pool: o.pool, socket: o.socketPath }, 'warm sandbox waiting to be claimed');
  const got = await slug;
  await new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
  await rm(o.socketPath, { force: true });
  logger.info({ pool: o.pool, slug: got }, 'warm sandbox claimed');
  return got;
}
