// The CLI's client of the registry API: @grove/client (every call derived from the endpoint table), its errors as ApiError.
import { GroveError, endpoints, type EndpointSpec, type ErrorCode, type HttpMethod } from '@grove/contracts';
import { createClient as createGroveClient, type GroveClient, type GroveClientError } from '@grove/client';
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

/** The endpoint of the table a method and path (with its query) name, with the parameters and query read out of it. */
export function matchEndpoint(method: string, target: string): { endpoint: EndpointSpec; params: Record<string, string>; query: Record<string, string> } | null {
  const url = new URL(target, 'http://grove.invalid');
  for (const e of Object.values(endpoints) as EndpointSpec[]) {
    if (e.method !== method) continue;
    const names: string[] = [];
    const pattern = e.path.replace(/:([A-Za-z]+)/g, (_, name: string) => {
      names.push(name);
      return '([^/]+)';
    });
    const m = new RegExp(`^${pattern}$`).exec(url.pathname);
    if (!m) continue;
    const params = Object.fromEntries(names.map((n, i) => [n, decodeURIComponent(m[i + 1] ?? '')]));
    return { endpoint: e, params, query: Object.fromEntries(url.searchParams) };
  }
  return null;
}

export function createClient(env: CliEnv): {
  /** Typed calls, one per endpoint of the table: what commands use. */
  api: GroveClient;
  /** A call named by method and path: checked against the table (/api) or sent to the workspace proxy (/w/), the answer parsed with `schema`. */
  call: <T extends z.ZodType>(schema: T, method: HttpMethod, p: string, body?: unknown) => Promise<z.infer<T>>;
} {
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

  async function call<T extends z.ZodType>(schema: T, method: HttpMethod, p: string, body?: unknown): Promise<z.infer<T>> {
    let answer: unknown;
    if (p.startsWith('/api/')) {
      const m = matchEndpoint(method, p);
      if (!m) throw new GroveError('internal', `${method} ${p} is not an endpoint of the API table`);
      answer = await api.request(m.endpoint, { params: m.params, query: m.query, body } as never);
    } else {
      answer = await api.raw({ method, path: p, schema, body });
    }
    const parsed = schema.safeParse(answer);
    if (!parsed.success) throw new GroveError('internal', `unexpected response from ${method} ${p}: ${parsed.error.message}`);
    return parsed.data;
  }
  return { api, call };
}
