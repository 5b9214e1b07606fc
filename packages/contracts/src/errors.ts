import { z } from 'zod';

/** The closed set of error codes, and the one table from code to HTTP status. */
export const ERROR_STATUS = {
  invalid_input: 422,
  invalid_name: 422,
  unauthorized: 401,
  forbidden_origin: 403,
  not_found: 404,
  workspace_not_found: 404,
  project_not_found: 404,
  workspace_exists: 409,
  workspace_stopped: 409,
  invalid_state: 409,
  capacity_reached: 429,
  git_busy: 503,
  git_failed: 500,
  spawn_failed: 500,
  docker_unavailable: 503,
  backend_unavailable: 502,
  /** The workspace backend accepted a proxied request but did not start its answer in time (GROVE_BACKEND_TIMEOUT_MS). */
  backend_timeout: 504,
  /** /preview/<port>/ names a port outside the workspace's preview allowlist (or one of the backend's own). */
  port_not_allowed: 403,
  /** Nothing answers on the previewed port inside the workspace. */
  preview_unreachable: 502,
  /** The egress gate refused a connection (policy, address class, invalid target). */
  egress_denied: 403,
  /** The egress gate has as many open tunnels as the workspace may hold. */
  egress_limit: 429,
  /** The egress gate allowed a connection but could not resolve or reach the upstream. */
  egress_upstream: 502,
  /** The workspace already has as many terminals as it may (MAX_TERMINALS). */
  terminal_limit: 429,
  /** POST /api/projects with a name that is already registered. */
  project_exists: 409,
  /** A git remote (clone source, origin) could not be reached or refused our credentials; details.reason says which. */
  remote_failed: 502,
  /** The remote refused the push itself (non-fast-forward, protected branch); details.reason says which. */
  push_rejected: 409,
  /** The forge's REST API could not be reached or answered an error. */
  forge_failed: 502,
  /** An action needs configuration the server or project does not have (forge, token, remote). */
  not_configured: 409,
  internal: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;
export const errorCodeSchema = z.enum(Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]]);

export const errorBodySchema = z
  .object({
    code: errorCodeSchema,
    message: z.string(),
    issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  })
  .catchall(z.unknown());
export type ErrorBody = z.infer<typeof errorBodySchema>;

/** The one error type: a code from the table, a message that names the problem, optional details for the body. */
export class GroveError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown>;
  constructor(code: ErrorCode, message: string, options: { details?: Record<string, unknown>; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GroveError';
    this.code = code;
    this.details = options.details ?? {};
  }
  get status(): number {
    return ERROR_STATUS[this.code];
  }
  toBody(): ErrorBody {
    return { ...this.details, code: this.code, message: this.message };
  }
}

export function isGroveError(e: unknown): e is GroveError {
  return e instanceof GroveError;
}

/** Parse with a schema or throw GroveError(invalid_input | invalid_name) whose message names each failed rule. */
export function parseOrThrow<T extends z.ZodType>(
  schema: T,
  value: unknown,
  options: { what: string; code?: ErrorCode } = { what: 'input' },
): z.infer<T> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issues = r.error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message }));
  const text = issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; ');
  throw new GroveError(options.code ?? 'invalid_input', `invalid ${options.what}: ${text}`, { details: { issues } });
}
