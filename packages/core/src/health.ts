import { request } from 'node:http';
import { backendHealthSchema } from '@grove/contracts';
import type { BackendHealth } from '@grove/contracts';

const MAX_BODY = 1 << 20;

/** GET a JSON document from a backend over its Unix socket (no keep-alive: one socket per probe). */
export function getOverSocket(socketPath: string, path: string, timeoutMs: number): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path, method: 'GET', agent: false, timeout: timeoutMs, headers: { host: 'grove-backend' } }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_BODY) req.destroy(new Error('response too large'));
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
        resolve({ status: res.statusCode ?? 0, body });
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
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
