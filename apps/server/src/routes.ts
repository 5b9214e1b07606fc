// Routes from the contracts' endpoint table: parameters, query and body are checked with its schemas before a
// handler runs, and every answer is checked against the endpoint's response schema before it is sent.
import type { Context, Hono } from 'hono';
import type { Logger } from 'pino';
import type { z } from 'zod';
import {
  COMMON_ERROR_CODES,
  GroveError,
  isGroveError,
  parseOrThrow,
  responseSchemaFor,
  type EndpointBody,
  type EndpointBodyInput,
  type EndpointParams,
  type EndpointQuery,
  type EndpointResponseSchema,
  type EndpointSpec,
  type EndpointStatus,
  type ErrorCode,
  type SuccessStatus,
} from '@grove/contracts';

/** What a handler is given: the parsed input, the body as it was sent (checked), and Hono's context. */
export interface RouteInput<E extends EndpointSpec> {
  params: EndpointParams<E>;
  query: EndpointQuery<E>;
  body: EndpointBody<E>;
  /** The body as sent, already checked: a project config is stored as given (defaults apply when it is read). */
  sent: EndpointBodyInput<E>;
  c: Context;
}

const REPLY: unique symbol = Symbol('reply');
/** An answer with another success status than the endpoint's usual one (made by `reply`). */
export interface Reply<S extends SuccessStatus, B> {
  readonly [REPLY]: true;
  readonly status: S;
  readonly body: B;
}

export function reply<S extends SuccessStatus, B>(status: S, body: B): Reply<S, B> {
  return { [REPLY]: true, status, body };
}

function isReply(v: unknown): v is Reply<SuccessStatus, unknown> {
  return typeof v === 'object' && v !== null && REPLY in v;
}

type Replies<E extends EndpointSpec> = { [S in EndpointStatus<E>]: Reply<S, z.input<EndpointResponseSchema<E, S>>> }[EndpointStatus<E>];
/** A body for the usual status, a reply() for another, or for a stream the Response that streams it. */
export type Answer<E extends EndpointSpec> = E extends { readonly stream: true } ? Response : z.input<E['response']> | Replies<E>;
export type Handler<E extends EndpointSpec> = (input: RouteInput<E>) => Promise<Answer<E>>;

function contentIsJson(c: Context): boolean {
  return (c.req.header('content-type') ?? '').includes('application/json');
}

const NOT_JSON = 'request body must be JSON (content-type: application/json)';

/** The JSON body; an optional one (start, checkpoint, publish) may be left out entirely and reads as {}. */
async function readBody(c: Context, optional: boolean): Promise<unknown> {
  if (optional) {
    const text = await c.req.text();
    if (!text.trim()) return {};
    if (!contentIsJson(c)) throw new GroveError('invalid_input', NOT_JSON);
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new GroveError('invalid_input', 'request body is not valid JSON');
    }
  }
  if (!contentIsJson(c)) throw new GroveError('invalid_input', NOT_JSON);
  try {
    return await c.req.json();
  } catch {
    throw new GroveError('invalid_input', 'request body is not valid JSON');
  }
}

async function parseInput(e: EndpointSpec, c: Context): Promise<{ params: unknown; query: unknown; body: unknown; sent: unknown }> {
  const raw = c.req.param() as Record<string, string | undefined>;
  const params: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(e.params ?? {})) params[name] = parseOrThrow(spec.schema, raw[name], { what: spec.what, code: spec.code });
  const query = e.query ? parseOrThrow(e.query, c.req.query(), { what: 'query' }) : undefined;
  if (!e.body) return { params, query, body: undefined, sent: undefined };
  const sent = await readBody(c, e.body.optional === true);
  const names = new Set(e.body.nameFields ?? []);
  // Names get their own code so clients can point at the field; everything else is invalid_input.
  const nameIssue = names.size > 0 && (e.body.schema.safeParse(sent).error?.issues.some((i) => names.has(String(i.path[0]))) ?? false);
  const body = parseOrThrow(e.body.schema, sent, { what: e.body.what, code: nameIssue ? 'invalid_name' : 'invalid_input' });
  return { params, query, body, sent };
}

/** `route(endpoints.x, handler)` for the app: the one way a route of the table is answered. */
export function createRouter(app: Hono, opts: { logger: Logger }) {
  const { logger } = opts;
  return function route<E extends EndpointSpec>(e: E, handler: Handler<E>): void {
    const name = `${e.method} ${e.path}`;
    const declared = new Set<ErrorCode>([...e.errors, ...COMMON_ERROR_CODES]);
    app.on(e.method, e.path, async (c) => {
      try {
        const input = await parseInput(e, c);
        const answer: unknown = await handler({ ...input, c } as RouteInput<E>);
        if (answer instanceof Response) return answer;
        const { status, body } = isReply(answer) ? answer : { status: e.status, body: answer };
        const checked = responseSchemaFor(e, status)?.safeParse(body);
        if (!checked?.success) {
          logger.error({ endpoint: name, status, issues: checked?.error.issues }, `${name}: the answer does not match the endpoint table`);
          throw new GroveError('internal', `${name} built an answer its contract does not allow; see the server log`);
        }
        // The body as built is sent, not the parsed copy: parsing would drop fields the schema does not name.
        return c.json(body, status);
      } catch (err) {
        // The table says which codes an endpoint answers; one it does not list is a gap in the table to fix.
        if (isGroveError(err) && !declared.has(err.code)) logger.warn({ endpoint: name, code: err.code }, `${name} answered ${err.code}, which its table entry does not list`);
        throw err;
      }
    });
  };
}
