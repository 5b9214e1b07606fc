import { z } from 'zod';
import type { ErrorCode } from './errors.ts';
import { projectNameSchema, slugSchema } from './names.ts';
import {
  eventSchema,
  eventsQuerySchema,
  eventsResponseSchema,
  forkAcceptedResponseSchema,
  forkQueuedResponseSchema,
  forkRequestSchema,
  healthResponseSchema,
  lastMessageResponseSchema,
  listProjectsResponseSchema,
  listWorkspacesResponseSchema,
  projectResponseSchema,
  recentMessagesResponseSchema,
  restoreRequestSchema,
  savedWorkResponseSchema,
  startRequestSchema,
  updateWorkspaceRequestSchema,
  workspaceResponseSchema,
} from './workspace.ts';
import { projectConfigPatchSchema, projectConfigResponseSchema, projectConfigSchema } from './agent.ts';
import {
  addProjectRequestSchema,
  checkpointRequestSchema,
  checkpointResponseSchema,
  diffQuerySchema,
  diffResponseSchema,
  overlayListResponseSchema,
  overlayPathQuerySchema,
  publishRequestSchema,
  publishResponseSchema,
  pullRequestResponseSchema,
  putOverlayFileRequestSchema,
} from './git-flow.ts';
import { egressPolicySchema, egressResetResponseSchema, egressResponseSchema } from './egress.ts';
import { turnDiffResponseSchema, turnNumberSchema, turnsResponseSchema, undoResponseSchema } from './turns.ts';
import { teardownPreviewSchema } from './teardown.ts';
import { previewPortParamSchema, previewUrlResponseSchema } from './thread.ts';

/**
 * The registry API under /api, written once (issue 15): each entry's method, path, parameter, query and body
 * schemas, its success answers and the error codes it may answer. The server registers its routes from this
 * table and validates with these schemas; @grove/client derives every call from it, so no client spells a route.
 */

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
export type SuccessStatus = 200 | 201 | 202;

/** A path parameter: its schema, what a refusal calls it ("invalid workspace slug: ...") and the code it answers. */
export interface ParamSpec<S extends z.ZodType = z.ZodType> {
  readonly schema: S;
  readonly what: string;
  readonly code: ErrorCode;
}

/** A JSON request body: its schema and what a refusal calls it ("invalid egress policy: ..."). */
export interface BodySpec<S extends z.ZodType = z.ZodType> {
  readonly schema: S;
  readonly what: string;
  /** The body may be left out entirely (no bytes, no content-type): it reads as {}. */
  readonly optional?: boolean;
  /** Top-level fields whose issues answer invalid_name instead of invalid_input, so clients can point at the field. */
  readonly nameFields?: readonly string[];
}

/** The names of a path template's parameters: `/api/workspaces/:slug/turns/:n/diff` has slug and n. */
export type PathParamNames<P extends string> = P extends `${string}:${infer N}/${infer Rest}`
  ? N | PathParamNames<`/${Rest}`>
  : P extends `${string}:${infer N}`
    ? N
    : never;

export interface EndpointSpec {
  readonly method: HttpMethod;
  readonly path: `/api/${string}`;
  readonly params?: Readonly<Record<string, ParamSpec>>;
  /** Query parameters (strings on the wire; the schema coerces). Refusals answer invalid_input ("invalid query: ..."). */
  readonly query?: z.ZodType<Record<string, unknown>>;
  readonly body?: BodySpec;
  /** The usual success status, answered with `response`. */
  readonly status: SuccessStatus;
  readonly response: z.ZodType;
  /** Other success answers, by status (a fork that waits in line answers 202 with its place). */
  readonly also?: Partial<Readonly<Record<SuccessStatus, z.ZodType>>>;
  /** Server-sent events: `response` is the data of each event, not a JSON body. */
  readonly stream?: true;
  /** Answered without a token (the health check). */
  readonly public?: true;
  /** The codes this endpoint may answer besides COMMON_ERROR_CODES; all from the closed set (ERROR_STATUS). */
  readonly errors: readonly ErrorCode[];
}

/** Every /api endpoint may answer these: the token or origin check failed, or something unexpected broke. */
export const COMMON_ERROR_CODES = ['unauthorized', 'forbidden_origin', 'internal'] as const satisfies readonly ErrorCode[];

type ParamsFor<P extends string> = [PathParamNames<P>] extends [never]
  ? { readonly params?: undefined }
  : { readonly params: { readonly [K in PathParamNames<P>]: ParamSpec } };

/** One entry of the table: the path's parameters must be exactly the ones declared (checked by the compiler). */
function endpoint<const P extends `/api/${string}`, const E extends Omit<EndpointSpec, 'path' | 'params'> & ParamsFor<P>>(e: E & { readonly path: P }): E & { readonly path: P } {
  return e;
}

const slug = { schema: slugSchema, what: 'workspace slug', code: 'invalid_name' } as const satisfies ParamSpec;
const project = { schema: projectNameSchema, what: 'project name', code: 'invalid_name' } as const satisfies ParamSpec;
const turn = { schema: turnNumberSchema, what: 'turn number', code: 'invalid_input' } as const satisfies ParamSpec;
const port = { schema: previewPortParamSchema, what: 'port', code: 'invalid_input' } as const satisfies ParamSpec;

/** GET /api/workspaces: one project's, and with all=1 the gone ones too. */
export const listWorkspacesQuerySchema = z.object({ project: z.string().optional(), all: z.enum(['0', '1']).optional() });
/** POST /api/workspaces and .../restore: wait=false (or 0) answers 202 at once; the rest continues in the background. */
export const forkQuerySchema = z.object({ wait: z.enum(['true', 'false', '1', '0']).optional() });
/** GET /api/workspaces/:slug/egress: how many of the latest gate decisions. */
export const egressQuerySchema = z.object({ limit: z.coerce.number().int().min(1).max(500).optional() });
/** PUT /api/workspaces/:slug/egress: the policy as stored (canonical hosts, sorted ports). */
export const egressPolicyResponseSchema = z.object({ policy: egressPolicySchema });
export type EgressPolicyResponse = z.infer<typeof egressPolicyResponseSchema>;
/** 202 to a fork: queued (waits for a slot) or accepted (wait=false: it is being created). */
export const forkPendingResponseSchema = z.union([forkQueuedResponseSchema, forkAcceptedResponseSchema]);

// What lifecycle calls may answer beyond a bad slug: the workspace, its state, the machine's capacity and Docker.
const reads = ['invalid_name', 'workspace_not_found'] as const satisfies readonly ErrorCode[];
const starts = ['capacity_reached', 'spawn_failed', 'docker_unavailable', 'git_busy', 'git_failed', 'invalid_state', 'project_not_found'] as const satisfies readonly ErrorCode[];
const git = ['git_busy', 'git_failed', 'invalid_state'] as const satisfies readonly ErrorCode[];

/** The routes of one project: its name in the path, 200 with the config or overlay list. */
const ofProject = { params: { project }, status: 200, errors: ['invalid_name', 'invalid_input', 'project_not_found'] } as const;

export const endpoints = {
  health: endpoint({ method: 'GET', path: '/api/health', status: 200, response: healthResponseSchema, public: true, errors: [] }),

  listProjects: endpoint({ method: 'GET', path: '/api/projects', status: 200, response: listProjectsResponseSchema, errors: [] }),
  /** A project from a repository, cloned bare under GROVE_HOME (docs/git-flow.md); nothing is started (its default: ensureDefault). */
  addProject: endpoint({
    method: 'POST',
    path: '/api/projects',
    body: { schema: addProjectRequestSchema, what: 'project request', nameFields: ['name'] },
    status: 201,
    response: projectResponseSchema,
    errors: ['invalid_input', 'invalid_name', 'project_exists', 'remote_failed', 'git_failed'],
  }),
  /**
   * The project's default workspace, its one conversation: 200 with the live one in whatever state it is (reopening a
   * stopped one is POST .../start), or 202 with one begun now, not waited for (creating, or queued at the cap: a first
   * message is never refused). What the dashboard and `grove send` call before a project's first message.
   */
  ensureDefault: endpoint({
    method: 'POST',
    path: '/api/projects/:project/default',
    params: { project },
    status: 200,
    response: workspaceResponseSchema,
    also: { 202: forkPendingResponseSchema },
    errors: ['invalid_name', 'project_not_found', 'docker_unavailable', 'invalid_state', 'git_busy', 'git_failed', 'spawn_failed'],
  }),
  /** A project's agent, allowed paths, forge... (docs/agents.md); PUT and PATCH apply to containers created afterwards. */
  projectConfig: endpoint({ method: 'GET', path: '/api/projects/:project/config', ...ofProject, response: projectConfigResponseSchema }),
  setProjectConfig: endpoint({
    method: 'PUT',
    path: '/api/projects/:project/config',
    ...ofProject,
    body: { schema: projectConfigSchema, what: 'project config' },
    response: projectConfigResponseSchema,
  }),
  patchProjectConfig: endpoint({
    method: 'PATCH',
    path: '/api/projects/:project/config',
    ...ofProject,
    body: { schema: projectConfigPatchSchema, what: 'project config change' },
    response: projectConfigResponseSchema,
  }),
  /** The config-parity overlay (docs/git-flow.md): local files workspaces get and commits never carry; each call answers the list. */
  overlay: endpoint({ method: 'GET', path: '/api/projects/:project/overlay', ...ofProject, response: overlayListResponseSchema }),
  putOverlayFile: endpoint({
    method: 'PUT',
    path: '/api/projects/:project/overlay',
    ...ofProject,
    body: { schema: putOverlayFileRequestSchema, what: 'overlay file' },
    response: overlayListResponseSchema,
  }),
  deleteOverlayFile: endpoint({
    method: 'DELETE',
    path: '/api/projects/:project/overlay',
    ...ofProject,
    query: overlayPathQuerySchema,
    response: overlayListResponseSchema,
    errors: [...ofProject.errors, 'not_found'],
  }),

  listWorkspaces: endpoint({ method: 'GET', path: '/api/workspaces', query: listWorkspacesQuerySchema, status: 200, response: listWorkspacesResponseSchema, errors: ['invalid_input'] }),
  /** 201 when ready; 202 with wait=false (creating) or queue: true at the cap (queued, with its place). */
  fork: endpoint({
    method: 'POST',
    path: '/api/workspaces',
    query: forkQuerySchema,
    body: { schema: forkRequestSchema, what: 'workspace request', nameFields: ['name', 'project'] },
    status: 201,
    response: workspaceResponseSchema,
    also: { 202: forkPendingResponseSchema },
    errors: ['invalid_input', 'invalid_name', 'workspace_exists', 'not_found', 'remote_failed', ...starts],
  }),
  getWorkspace: endpoint({ method: 'GET', path: '/api/workspaces/:slug', params: { slug }, status: 200, response: workspaceResponseSchema, errors: reads }),
  /** The workspace's own settings; keepCheckoutOnClose null goes back to the project's. */
  updateWorkspace: endpoint({
    method: 'PATCH',
    path: '/api/workspaces/:slug',
    params: { slug },
    body: { schema: updateWorkspaceRequestSchema, what: 'workspace settings' },
    status: 200,
    response: workspaceResponseSchema,
    errors: [...reads, 'invalid_input', 'invalid_state'],
  }),
  /** Container and worktree removed, thread archived, branch kept; uncommitted work saved to a recovery ref. */
  teardown: endpoint({ method: 'DELETE', path: '/api/workspaces/:slug', params: { slug }, status: 200, response: workspaceResponseSchema, errors: [...reads, ...git, 'docker_unavailable'] }),
  stop: endpoint({ method: 'POST', path: '/api/workspaces/:slug/stop', params: { slug }, status: 200, response: workspaceResponseSchema, errors: [...reads, 'invalid_state', 'docker_unavailable'] }),
  /** Reopen a stopped workspace; with queue: true at the cap it waits in line (202). */
  start: endpoint({
    method: 'POST',
    path: '/api/workspaces/:slug/start',
    params: { slug },
    body: { schema: startRequestSchema, what: 'start request', optional: true },
    status: 200,
    response: workspaceResponseSchema,
    also: { 202: forkQueuedResponseSchema },
    errors: [...reads, 'invalid_input', ...starts],
  }),
  /** The last thing said in the thread, read on the host: there while the workspace is stopped. */
  lastMessage: endpoint({ method: 'GET', path: '/api/workspaces/:slug/last-message', params: { slug }, status: 200, response: lastMessageResponseSchema, errors: reads }),
  /** The newest things said in the thread (RECENT_MESSAGES at most), read on the host: the conversation while it is stopped. */
  recentMessages: endpoint({ method: 'GET', path: '/api/workspaces/:slug/recent-messages', params: { slug }, status: 200, response: recentMessagesResponseSchema, errors: reads }),
  /** What a teardown would keep (branch, recovery ref) and remove, for the confirmation. */
  teardownPreview: endpoint({ method: 'GET', path: '/api/workspaces/:slug/teardown-preview', params: { slug }, status: 200, response: teardownPreviewSchema, errors: [...reads, 'git_failed'] }),
  /** The stable address of a port's preview on the preview origin (the same across stop, reopen and restart). */
  previewUrl: endpoint({ method: 'GET', path: '/api/workspaces/:slug/preview/:port', params: { slug, port }, status: 200, response: previewUrlResponseSchema, errors: [...reads, 'invalid_input'] }),
  /** Work saved from a removed worktree (refs/grove/<slug>/teardown/<n>); the slug may be gone. */
  savedWork: endpoint({ method: 'GET', path: '/api/workspaces/:slug/saved', params: { slug }, status: 200, response: savedWorkResponseSchema, errors: ['invalid_name', 'git_failed'] }),
  /** Saved work of :slug (the newest, or number n) as a new workspace; 201 when ready, 202 with wait=false. */
  restore: endpoint({
    method: 'POST',
    path: '/api/workspaces/:slug/restore',
    params: { slug },
    query: forkQuerySchema,
    body: { schema: restoreRequestSchema, what: 'restore request', nameFields: ['name'] },
    status: 201,
    response: workspaceResponseSchema,
    also: { 202: forkAcceptedResponseSchema },
    errors: ['invalid_name', 'invalid_input', 'not_found', 'workspace_exists', ...starts],
  }),
  /** The egress policy, whether it is the project default, and the latest gate decisions (newest first). */
  egress: endpoint({
    method: 'GET',
    path: '/api/workspaces/:slug/egress',
    params: { slug },
    query: egressQuerySchema,
    status: 200,
    response: egressResponseSchema,
    errors: [...reads, 'invalid_input'],
  }),
  /** Replace the workspace's policy, applied at once to its running gate. */
  setEgressPolicy: endpoint({
    method: 'PUT',
    path: '/api/workspaces/:slug/egress',
    params: { slug },
    body: { schema: egressPolicySchema, what: 'egress policy' },
    status: 200,
    response: egressPolicyResponseSchema,
    errors: [...reads, 'invalid_input'],
  }),
  /** Back to the project default policy (source "default"). */
  resetEgress: endpoint({ method: 'DELETE', path: '/api/workspaces/:slug/egress', params: { slug }, status: 200, response: egressResetResponseSchema, errors: reads }),
  /** Undo the last turn that changed files (repeatable): files back to before it, a marker in the thread. */
  undo: endpoint({
    method: 'POST',
    path: '/api/workspaces/:slug/undo',
    params: { slug },
    status: 200,
    response: undoResponseSchema,
    errors: [...reads, ...git, 'workspace_stopped', 'backend_unavailable'],
  }),
  /** The turns that changed files, newest first; read from git, so a stopped workspace answers too. */
  turns: endpoint({ method: 'GET', path: '/api/workspaces/:slug/turns', params: { slug }, status: 200, response: turnsResponseSchema, errors: [...reads, 'git_failed'] }),
  turnDiff: endpoint({
    method: 'GET',
    path: '/api/workspaces/:slug/turns/:n/diff',
    params: { slug, n: turn },
    status: 200,
    response: turnDiffResponseSchema,
    errors: [...reads, 'invalid_input', 'not_found', 'git_failed'],
  }),
  /** Commit the worktree on the branch from the host; commit null when there was nothing to commit. */
  checkpoint: endpoint({
    method: 'POST',
    path: '/api/workspaces/:slug/checkpoint',
    params: { slug },
    body: { schema: checkpointRequestSchema, what: 'checkpoint request', optional: true },
    status: 200,
    response: checkpointResponseSchema,
    errors: [...reads, 'invalid_input', ...git],
  }),
  /** The branch plus uncommitted work against the fork point, ahead/behind the default branch; works stopped too. */
  diff: endpoint({
    method: 'GET',
    path: '/api/workspaces/:slug/diff',
    params: { slug },
    query: diffQuerySchema,
    status: 200,
    response: diffResponseSchema,
    errors: [...reads, 'invalid_input', 'not_found', ...git],
  }),
  /** Checkpoint, push, open (or find) the pull request. */
  publish: endpoint({
    method: 'POST',
    path: '/api/workspaces/:slug/publish',
    params: { slug },
    body: { schema: publishRequestSchema, what: 'publish request', optional: true },
    status: 200,
    response: publishResponseSchema,
    errors: [...reads, 'invalid_input', ...git, 'not_configured', 'remote_failed', 'push_rejected', 'forge_failed'],
  }),

  /** The pull request as the forge reports it now (state, the head commit's checks), null before publish; and what its end does. */
  pullRequest: endpoint({
    method: 'GET',
    path: '/api/workspaces/:slug/pull-request',
    params: { slug },
    status: 200,
    response: pullRequestResponseSchema,
    errors: [...reads, 'not_configured', 'forge_failed', 'project_not_found'],
  }),

  /** The audit trail, oldest first (of one slug, after an id, of one type). */
  events: endpoint({ method: 'GET', path: '/api/events', query: eventsQuerySchema, status: 200, response: eventsResponseSchema, errors: ['invalid_input'] }),
  /** The same as server-sent events (`event: grove`), live; Last-Event-ID or ?after= replays what was missed. */
  eventsStream: endpoint({ method: 'GET', path: '/api/events/stream', query: eventsQuerySchema, status: 200, response: eventSchema, stream: true, errors: ['invalid_input'] }),
} as const;

export type Endpoints = typeof endpoints;
export type EndpointName = keyof Endpoints;

// ---- types derived from an entry (z.infer of its schemas), for the server's handlers and the client ----

type ParamsSpecOf<E> = E extends { readonly params: infer P extends Readonly<Record<string, ParamSpec>> } ? P : never;
/** The parsed path parameters (a turn number is a number). */
export type EndpointParams<E> = { -readonly [K in keyof ParamsSpecOf<E>]: z.output<ParamsSpecOf<E>[K]['schema']> };
/** The parsed query. */
export type EndpointQuery<E> = E extends { readonly query: infer Q extends z.ZodType } ? z.output<Q> : undefined;
/** The body as sent (before defaults and transforms). */
export type EndpointBodyInput<E> = E extends { readonly body: { readonly schema: infer S extends z.ZodType } } ? z.input<S> : undefined;
/** The body as parsed. */
export type EndpointBody<E> = E extends { readonly body: { readonly schema: infer S extends z.ZodType } } ? z.output<S> : undefined;

type AlsoOf<E> = E extends { readonly also: infer A extends Partial<Record<SuccessStatus, z.ZodType>> } ? A : Record<never, never>;
/** Every success status of an endpoint. */
export type EndpointStatus<E extends EndpointSpec> = E['status'] | (keyof AlsoOf<E> & SuccessStatus);
/** The schema of the answer with one status. */
export type EndpointResponseSchema<E extends EndpointSpec, S extends SuccessStatus> = S extends E['status']
  ? E['response']
  : S extends keyof AlsoOf<E>
    ? AlsoOf<E>[S]
    : never;
/** Any success answer of an endpoint, parsed. */
export type EndpointResponse<E extends EndpointSpec> = { [S in EndpointStatus<E>]: z.output<EndpointResponseSchema<E, S>> }[EndpointStatus<E>];

/** What a caller gives: the path parameters, the query, the body; each key present only where the endpoint has it. */
export type EndpointRequest<E> = (E extends { readonly params: object } ? { params: EndpointParams<E> } : { params?: undefined }) &
  (E extends { readonly query: z.ZodType } ? (object extends EndpointQuery<E> ? { query?: EndpointQuery<E> } : { query: EndpointQuery<E> }) : { query?: undefined }) &
  (E extends { readonly body: { readonly optional: true } }
    ? { body?: EndpointBodyInput<E> }
    : E extends { readonly body: BodySpec }
      ? { body: EndpointBodyInput<E> }
      : { body?: undefined });

/** The schema of the answer with `status`, or null when the endpoint never answers it. */
export function responseSchemaFor(e: EndpointSpec, status: number): z.ZodType | null {
  if (status === e.status) return e.response;
  return e.also?.[status as SuccessStatus] ?? null;
}

/** The path of a call: parameters put in (URI-encoded), then the query (undefined values left out). */
export function endpointPath(e: EndpointSpec, input: { params?: Readonly<Record<string, unknown>>; query?: Readonly<Record<string, unknown>> } = {}): string {
  const path = e.path.replace(/:([A-Za-z]+)/g, (_, name: string) => {
    const value = input.params?.[name];
    if (value === undefined || value === null) throw new TypeError(`${e.method} ${e.path}: parameter ${name} is missing`);
    return encodeURIComponent(String(value));
  });
  const query = Object.entries(input.query ?? {})
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join('&');
  return query ? `${path}?${query}` : path;
}

/** The names of a template's parameters, in order (`:slug`, `:n`). */
export function pathParamNames(path: string): string[] {
  return [...path.matchAll(/:([A-Za-z]+)/g)].map((m) => m[1] ?? '');
}

