// @grove/client: the typed client of Grove's /api, each call derived from the contracts' endpoint table.
import {
  GroveError,
  endpointPath,
  endpoints,
  errorBodySchema,
  responseSchemaFor,
  type EndpointName,
  type EndpointRequest,
  type EndpointResponse,
  type EndpointSpec,
  type Endpoints,
  type HttpMethod,
} from '@grove/contracts';
import type { z } from 'zod';

/** Grove did not answer, or answered with something its contract does not allow. */
export class GroveClientError extends Error {
  /** unreachable: no answer; unexpected_status: an error without Grove's error body; bad_response: a success its schema refuses. */
  readonly kind: 'unreachable' | 'unexpected_status' | 'bad_response';
  readonly method: string;
  readonly path: string;
  /** The HTTP status; 0 when Grove did not answer. */
  readonly status: number;
  readonly statusText: string;
  /** For bad_response: what the response schema refused. */
  readonly issues: readonly z.core.$ZodIssue[];
  constructor(
    kind: GroveClientError['kind'],
    message: string,
    o: { method: string; path: string; status: number; statusText?: string; issues?: readonly z.core.$ZodIssue[]; cause?: unknown },
  ) {
    super(message, o.cause === undefined ? undefined : { cause: o.cause });
    this.name = 'GroveClientError';
    this.kind = kind;
    this.method = o.method;
    this.path = o.path;
    this.status = o.status;
    this.statusText = o.statusText ?? '';
    this.issues = o.issues ?? [];
  }
}

export function isGroveClientError(e: unknown): e is GroveClientError {
  return e instanceof GroveClientError;
}

export type FetchLike = (url: string, init: RequestInit) => Promise<Response>;

export interface ClientOptions {
  /** Where Grove answers, e.g. http://localhost:4300; '' for the page's own origin. */
  baseUrl: string;
  /** Default: the global fetch. The dashboard passes one that keeps same-origin credentials and no cache. */
  fetch?: FetchLike;
  /** Sent with every call (a bearer token); a function is asked each time. */
  headers?: Readonly<Record<string, string>> | (() => Readonly<Record<string, string>>);
  /** What is thrown instead of each GroveError (an answer of the server) or GroveClientError; default: it itself. */
  mapError?: (e: GroveError | GroveClientError) => unknown;
}

export interface CallOptions {
  signal?: AbortSignal;
}

/** A call's one argument: optional when the endpoint needs no parameters and no body. */
type Args<E> = object extends EndpointRequest<E> ? [input?: EndpointRequest<E> & CallOptions] : [input: EndpointRequest<E> & CallOptions];
type JsonName = { [K in EndpointName]: Endpoints[K] extends { readonly stream: true } ? never : K }[EndpointName];

/** One method per JSON endpoint of the table, named as in the table. */
export type GroveCalls = { [K in JsonName]: (...args: Args<Endpoints[K]>) => Promise<EndpointResponse<Endpoints[K]>> };

export interface GroveClientBase {
  /** Any endpoint of the table, given as the entry itself (for code that picks the endpoint at run time). */
  request<E extends EndpointSpec>(e: E, input?: EndpointRequest<E> & CallOptions): Promise<EndpointResponse<E>>;
  /** The URL of a call, as fetch would use it: an EventSource on a stream endpoint (eventsStream). */
  url<K extends EndpointName>(name: K, ...args: Args<Endpoints[K]>): string;
  /**
   * A JSON call outside the table, with the same errors: the workspace proxy /w/<slug>/..., whose routes are
   * the sandbox backend's own, passed through.
   */
  raw<S extends z.ZodType>(call: { method: HttpMethod; path: string; schema: S; body?: unknown } & CallOptions): Promise<z.output<S>>;
}

export type GroveClient = GroveCalls & GroveClientBase;

/** The JSON of an answer, or undefined when it has none or is not JSON. */
async function readJson(res: Response): Promise<unknown> {
  const text = await res.text().catch(() => '');
  if (!text) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** Grove's error body as the one error type: its code, message and the rest as details (issues, running, cap...). */
function groveErrorOf(json: unknown): GroveError | null {
  const parsed = errorBodySchema.safeParse(json);
  if (!parsed.success) return null;
  const { code, message, ...details } = parsed.data;
  return new GroveError(code, message, { details });
}

export function createClient(opts: ClientOptions): GroveClient {
  const base = opts.baseUrl.replace(/\/$/, '');
  const doFetch: FetchLike = opts.fetch ?? ((url, init) => fetch(url, init));
  const fail = (e: GroveError | GroveClientError): never => {
    throw opts.mapError ? opts.mapError(e) : e;
  };

  async function send(c: { method: HttpMethod; path: string; body?: unknown; signal?: AbortSignal | undefined }, schemaFor: (status: number) => z.ZodType | null): Promise<unknown> {
    const extra = typeof opts.headers === 'function' ? opts.headers() : (opts.headers ?? {});
    // The API refuses a body that is not declared as JSON; calls without a body send no content-type.
    const headers: Record<string, string> = { ...extra, ...(c.body === undefined ? {} : { 'content-type': 'application/json' }) };
    const where = { method: c.method, path: c.path };
    let res: Response;
    try {
      res = await doFetch(`${base}${c.path}`, {
        method: c.method,
        headers,
        body: c.body === undefined ? null : JSON.stringify(c.body),
        ...(c.signal ? { signal: c.signal } : {}),
      });
    } catch (cause) {
      return fail(new GroveClientError('unreachable', `cannot reach Grove at ${base || 'this origin'} (${(cause as Error).message})`, { ...where, status: 0, cause }));
    }
    const json = await readJson(res);
    const answer = { ...where, status: res.status, statusText: res.statusText };
    if (!res.ok) {
      const err = groveErrorOf(json);
      return fail(err ?? new GroveClientError('unexpected_status', `Grove answered ${[res.status, res.statusText].filter(Boolean).join(' ')} for ${c.method} ${c.path}`, answer));
    }
    const schema = schemaFor(res.status);
    if (!schema) return fail(new GroveClientError('bad_response', `Grove answered ${c.method} ${c.path} with status ${res.status}, which it never sends`, answer));
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      return fail(new GroveClientError('bad_response', `unexpected response from ${c.method} ${c.path}: ${parsed.error.message}`, { ...answer, issues: parsed.error.issues }));
    }
    return parsed.data;
  }

  async function request<E extends EndpointSpec>(e: E, input: EndpointRequest<E> & CallOptions = {} as EndpointRequest<E> & CallOptions): Promise<EndpointResponse<E>> {
    const i = input as { params?: Record<string, unknown>; query?: Record<string, unknown>; body?: unknown; signal?: AbortSignal };
    const path = endpointPath(e, { params: i.params ?? {}, query: i.query ?? {} });
    return (await send({ method: e.method, path, body: i.body, signal: i.signal }, (status) => responseSchemaFor(e, status))) as EndpointResponse<E>;
  }

  const calls: Record<string, unknown> = {};
  for (const [name, e] of Object.entries(endpoints) as Array<[string, EndpointSpec]>) {
    if (!e.stream) calls[name] = (input?: EndpointRequest<EndpointSpec> & CallOptions) => request(e, input);
  }
  const rest: GroveClientBase = {
    request,
    url: ((name: EndpointName, input: { params?: Record<string, unknown>; query?: Record<string, unknown> } = {}) => {
      const table: Readonly<Record<string, EndpointSpec>> = endpoints;
      return `${base}${endpointPath(table[name] as EndpointSpec, input)}`;
    }) as GroveClientBase['url'],
    raw: async (c) => (await send(c, () => c.schema)) as z.output<typeof c.schema>,
  };
  return { ...(calls as GroveCalls), ...rest };
}
