// Browser-side client for the registry API and the workspace proxy: same-origin fetch, zod-checked bodies, one error type.
import {
  backendStatusSchema,
  checkpointResponseSchema,
  diffResponseSchema,
  listProjectsResponseSchema,
  publishResponseSchema,
  cancelTurnResponseSchema,
  egressResetResponseSchema,
  egressResponseSchema,
  errorBodySchema,
  eventsResponseSchema,
  forkAcceptedResponseSchema,
  lastMessageResponseSchema,
  listWorkspacesResponseSchema,
  overlayListResponseSchema,
  portsResponseSchema,
  postMessageResponseSchema,
  projectConfigResponseSchema,
  teardownPreviewSchema,
  threadResponseSchema,
  turnDiffResponseSchema,
  turnsResponseSchema,
  undoResponseSchema,
  workspaceResponseSchema,
  type ForkRequest,
  type ProjectConfigPatch,
  type PublishRequest,
  type PutOverlayFileRequest,
  type UpdateWorkspaceRequest,
} from '@grove/contracts';
import type { z } from 'zod';

/** Every failed call becomes this: the HTTP status (0 when Grove did not answer), the API's code and message. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly body: Record<string, unknown>;
  constructor(status: number, code: string, message: string, body: Record<string, unknown> = {}) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

export function isApiError(e: unknown): e is ApiError {
  return e instanceof ApiError;
}

/** The message to show for any thrown value. */
export function messageOf(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}

async function request<S extends z.ZodType>(path: string, schema: S, init: { method?: string; body?: unknown } = {}): Promise<z.infer<S>> {
  const method = init.method ?? 'GET';
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      // The API refuses a body that is not declared as JSON; requests without a body send no header.
      headers: init.body === undefined ? undefined : { 'content-type': 'application/json' },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch {
    throw new ApiError(0, 'network', 'Grove is not answering. Check that the server is still running, then try again.');
  }
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (!res.ok) {
    const err = errorBodySchema.safeParse(json);
    if (err.success) throw new ApiError(res.status, err.data.code, err.data.message, err.data);
    throw new ApiError(res.status, `http_${res.status}`, `Grove answered ${res.status} ${res.statusText} for ${method} ${path}`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) throw new ApiError(res.status, 'bad_response', `Grove sent an unexpected answer for ${method} ${path}`);
  return parsed.data;
}

const ws = (slug: string) => `/w/${encodeURIComponent(slug)}`;
const one = (slug: string) => `/api/workspaces/${encodeURIComponent(slug)}`;
const project = (name: string) => `/api/projects/${encodeURIComponent(name)}`;

export const api = {
  listWorkspaces: () => request('/api/workspaces', listWorkspacesResponseSchema),
  listProjects: () => request('/api/projects', listProjectsResponseSchema),
  getWorkspace: (slug: string) => request(one(slug), workspaceResponseSchema),
  /** Returns at once (202) with the workspace in `creating`; progress comes from the events. */
  fork: (req: ForkRequest) => request('/api/workspaces?wait=false', forkAcceptedResponseSchema, { method: 'POST', body: req }),
  stop: (slug: string) => request(`${one(slug)}/stop`, workspaceResponseSchema, { method: 'POST' }),
  start: (slug: string) => request(`${one(slug)}/start`, workspaceResponseSchema, { method: 'POST' }),
  /** The workspace's own settings; keepCheckoutOnClose null goes back to the project's. */
  updateWorkspace: (slug: string, req: UpdateWorkspaceRequest) => request(one(slug), workspaceResponseSchema, { method: 'PATCH', body: req }),
  /** The project's configuration (agent, allowed paths, forge, keepCheckoutOnClose, ...). */
  projectConfig: (name: string) => request(`${project(name)}/config`, projectConfigResponseSchema),
  /** Changes only the keys given (null: back to the default); the rest of the config stays as stored. */
  patchProjectConfig: (name: string, patch: ProjectConfigPatch) => request(`${project(name)}/config`, projectConfigResponseSchema, { method: 'PATCH', body: patch }),
  /** The project's overlay files (local files workspaces get and commits never carry); every call answers the list. */
  overlay: (name: string) => request(`${project(name)}/overlay`, overlayListResponseSchema),
  /** Adds or replaces one file; 422 when overlay.files of the config does not name its path. */
  putOverlayFile: (name: string, req: PutOverlayFileRequest) => request(`${project(name)}/overlay`, overlayListResponseSchema, { method: 'PUT', body: req }),
  deleteOverlayFile: (name: string, path: string) =>
    request(`${project(name)}/overlay?${new URLSearchParams({ path }).toString()}`, overlayListResponseSchema, { method: 'DELETE' }),
  teardown: (slug: string) => request(one(slug), workspaceResponseSchema, { method: 'DELETE' }),
  /** What a teardown would keep (branch, recovery ref) and remove, read on the host now. */
  teardownPreview: (slug: string) => request(`${one(slug)}/teardown-preview`, teardownPreviewSchema),
  /** The egress policy, whether it is the project default, and the latest gate decisions (newest first). */
  egress: (slug: string, limit = 20) => request(`${one(slug)}/egress?limit=${limit}`, egressResponseSchema),
  /** Back to the project default policy. */
  resetEgress: (slug: string) => request(`${one(slug)}/egress`, egressResetResponseSchema, { method: 'DELETE' }),
  /** Up to 1000 events of one workspace with id > after (only those of `type` when given), oldest first. */
  events: (slug: string, after?: number, type?: string) =>
    request(
      `/api/events?slug=${encodeURIComponent(slug)}&limit=1000${after === undefined ? '' : `&after=${after}`}${type === undefined ? '' : `&type=${encodeURIComponent(type)}`}`,
      eventsResponseSchema,
    ),
  thread: (slug: string) => request(`${ws(slug)}/thread`, threadResponseSchema),
  /** The last user or agent message, read on the host: works while the workspace is stopped. */
  lastMessage: (slug: string) => request(`${one(slug)}/last-message`, lastMessageResponseSchema),
  status: (slug: string) => request(`${ws(slug)}/status`, backendStatusSchema),
  postMessage: (slug: string, text: string) => request(`${ws(slug)}/messages`, postMessageResponseSchema, { method: 'POST', body: { text } }),
  /** TCP ports listening inside the sandbox, and whether each may be previewed. */
  ports: (slug: string) => request(`${ws(slug)}/ports`, portsResponseSchema),
  /** Stops the running turn (202); 409 invalid_state when it already ended. */
  cancelTurn: (slug: string) => request(`${ws(slug)}/turn/cancel`, cancelTurnResponseSchema, { method: 'POST' }),
  /** The turns that changed files, newest first (works while the workspace is stopped). */
  turns: (slug: string) => request(`${one(slug)}/turns`, turnsResponseSchema),
  turnDiff: (slug: string, n: number) => request(`${one(slug)}/turns/${n}/diff`, turnDiffResponseSchema),
  /** Puts the files back to before the last turn that changed them; 409 while a reply runs or when nothing is left. */
  undo: (slug: string) => request(`${one(slug)}/undo`, undoResponseSchema, { method: 'POST' }),
  /** The branch plus uncommitted work against the fork point, and ahead/behind the default branch (host side). */
  diff: (slug: string, maxBytes?: number) => request(`${one(slug)}/diff${maxBytes === undefined ? '' : `?maxBytes=${maxBytes}`}`, diffResponseSchema),
  /** Commits the worktree on the branch; commit null when there was nothing to commit. */
  checkpoint: (slug: string, message?: string) => request(`${one(slug)}/checkpoint`, checkpointResponseSchema, { method: 'POST', body: message ? { message } : {} }),
  /** Checkpoint, push, open (or update) the pull request. */
  publish: (slug: string, req: PublishRequest) => request(`${one(slug)}/publish`, publishResponseSchema, { method: 'POST', body: req }),
};

/** The WebSocket URL of a workspace's live stream, on this same origin (the cookie rides along). */
export function streamUrl(slug: string): string {
  const proto = window.location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${proto}//${window.location.host}${ws(slug)}/stream`;
}

/** The stable preview address of a port in a workspace (the same across stop and reopen). */
export function previewPath(slug: string, port: number): string {
  return `${ws(slug)}/preview/${port}/`;
}
