import { request } from 'node:http';
import { basename, dirname } from 'node:path';
import { backendHealthSchema } from '@grove/contracts';
import { verifyBackendSocket } from './backend-socket.ts';
import type { BackendHealth } from '@grove/contracts';

/** What the host reads of a backend's answer: it serves what the agent builds, so it is bounded. */
const MAX_BODY = 1 << 20;

/**
 * One JSON request to a backend over its Unix socket (no keep-alive: one socket per call). The body is
 * parsed as JSON when it is JSON, else given as text; past MAX_BODY the call fails. `timeoutMs` is a
 * deadline for the whole call (connect, head and body), not an idle bound: a backend that drips its answer
 * a byte at a time holds the caller (a stop, a health probe) no longer than one that says nothing.
 */
export async function overSocket(socketPath: string, o: { method: 'GET' | 'POST'; path: string; body?: unknown; timeoutMs: number }): Promise<{ status: number; body: unknown }> {
  // Never a link or anything but the backend's own socket (backend-socket.ts); an absent one fails below as before.
  await verifyBackendSocket(socketPath, basename(dirname(socketPath)), { absent: 'ok' });
  const payload = o.body === undefined ? undefined : JSON.stringify(o.body);
  const headers: Record<string, string | number> = { host: 'grove-backend' };
  if (payload !== undefined) Object.assign(headers, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) });
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (fn: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      fn();
    };
    const req = request({ socketPath, path: o.path, method: o.method, agent: false, headers }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_BODY) req.destroy(new Error(`response over ${MAX_BODY} bytes`));
        else chunks.push(c);
      });
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // Not JSON: callers see the raw text.
        }
        settle(() => resolve({ status: res.statusCode ?? 0, body }));
      });
      res.on('error', (err) => settle(() => reject(err)));
    });
    const deadline = setTimeout(() => req.destroy(new Error(`no complete answer within ${o.timeoutMs} ms`)), o.timeoutMs);
    req.on('error', (err) => settle(() => reject(err)));
    req.on('close', () => settle(() => reject(new Error('the backend closed the connection before answering'))));
    req.end(payload);
  });
}

/** GET a JSON document from a backend over its Unix socket. */
export function getOverSocket(socketPath: string, path: string, timeoutMs: number): Promise<{ status: number; body: unknown }> {
  return overSocket(socketPath, { method: 'GET', path, timeoutMs });
}

export type HealthProbe = { ok: true; health: BackendHealth } | { ok: false; error: string };

/** One /health probe; never throws. */
export async function probeHealth(socketPath: string, timeoutMs: number): Promise<HealthProbe> {
  try {
    const { status, body } = await getOverSocket(socketPath, '/health', timeoutMs);
    if (status !== 200) return { ok: false, error: `/health answered ${status}` };
    const parsed = backendHealthSchema.safeParse(body);
    if (!parsed.success) return { ok: false, error: `/health answered an unexpected body: ${JSON.stringify(body).slice(0, 200)}` };
    return { ok: true, health: parsed.data };
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return { ok: false, error: code === 'ENOENT' ? 'socket not created yet' : code === 'ECONNREFUSED' ? 'socket refuses connections' : (e as Error).message };
  }
}
