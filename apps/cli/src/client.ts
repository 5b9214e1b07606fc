// A small typed client of the registry API; every response is checked with the contracts schemas.
import { errorBodySchema, GroveError, type ErrorCode } from '@grove/contracts';
import type { z } from 'zod';
import type { CliEnv } from './env.ts';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode | 'unreachable',
    message: string,
    readonly body: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

export function createClient(env: CliEnv) {
  async function call<T extends z.ZodType>(schema: T, method: string, p: string, body?: unknown): Promise<z.infer<T>> {
    let res: Response;
    try {
      res = await fetch(`${env.url}${p}`, {
        method,
        headers: {
          ...(env.token ? { authorization: `Bearer ${env.token}` } : {}),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      throw new ApiError(0, 'unreachable', `cannot reach Grove at ${env.url} (${(e as Error).message}); is it running? Start it with: grove up (or npm run up)`);
    }
    const json: unknown = await res.json().catch(() => ({}));
    if (!res.ok) {
      const parsed = errorBodySchema.safeParse(json);
      if (parsed.success) throw new ApiError(res.status, parsed.data.code, parsed.data.message, parsed.data);
      throw new ApiError(res.status, 'internal', `Grove answered ${res.status}`);
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) throw new GroveError('internal', `unexpected response from ${method} ${p}: ${parsed.error.message}`);
    return parsed.data;
  }
  return { call };
}
