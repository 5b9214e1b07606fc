// The CLI's client of the registry API: @grove/client (every call derived from the endpoint table), its errors as ApiError.
import { GroveError, type ErrorCode } from '@grove/contracts';
import { createClient as createGroveClient, type GroveClient, type GroveClientError } from '@grove/client';
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

/** The registry API for commands: one typed call per endpoint of the table, every failure an ApiError (or GroveError). */
export function createClient(env: CliEnv): { api: GroveClient } {
  const toCliError = (e: GroveError | GroveClientError): Error => {
    if (e instanceof GroveError) return new ApiError(e.status, e.code, e.message, e.toBody());
    if (e.kind === 'unreachable') {
      const why = e.cause instanceof Error ? e.cause.message : String(e.cause);
      return new ApiError(0, 'unreachable', `cannot reach Grove at ${env.url} (${why}); is it running? Start it with: grove up (or npm run up)`);
    }
    if (e.kind === 'unexpected_status') return new ApiError(e.status, 'internal', `Grove answered ${e.status}`);
    return new GroveError('internal', e.message);
  };
  const api = createGroveClient({
    baseUrl: env.url,
    headers: env.token ? { authorization: `Bearer ${env.token}` } : {},
    mapError: toCliError,
  });

  return { api };
}
