// Browser-side client: the registry API through @grove/client (calls derived from the endpoint table), the
// workspace proxy through its raw calls; same-origin fetch, zod-checked bodies, one error type.
import {
  GroveError,
  backendStatusSchema,
  cancelTurnResponseSchema,
  createTerminalResponseSchema,
  fileContentResponseSchema,
  filesTreeResponseSchema,
  terminalListResponseSchema,
  portsResponseSchema,
  postMessageResponseSchema,
  threadResponseSchema,
  type ForkRequest,
  type HttpMethod,
  type ProjectConfigPatch,
  type PublishRequest,
  type PutOverlayFileRequest,
  type UpdateWorkspaceRequest,
} from '@grove/contracts';
import { createClient, type GroveClientError } from '@grove/client';
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

function toApiError(e: GroveError | GroveClientError): ApiError {
  if (e instanceof GroveError) return new ApiError(e.status, e.code, e.message, e.toBody());
  if (e.kind === 'unreachable') return new ApiError(0, 'network', 'Grove is not answering. Check that the server is still running, then try again.');
  if (e.kind === 'unexpected_status') return new ApiError(e.status, `http_${e.status}`, `Grove answered ${e.status} ${e.statusText} for ${e.method} ${e.path}`);
  return new ApiError(e.status, 'bad_response', `Grove sent an unexpected answer for ${e.method} ${e.path}`);
}

const client = createClient({
  baseUrl: '',
  fetch: (url, init) => fetch(url, { ...init, credentials: 'same-origin', cache: 'no-store' }),
  mapError: toApiError,
});

const ws = (slug: string) => `/w/${encodeURIComponent(slug)}`;
/** The workspace proxy: the sandbox backend's own routes under /w/<slug>/, outside the API table. */
const proxied = <S extends z.ZodType>(method: HttpMethod, slug: string, rest: string, schema: S, body?: unknown) => client.raw({ method, path: `${ws(slug)}${rest}`, schema, body });

export const api = {
  listWorkspaces: () => client.listWorkspaces(),
  listProjects: () => client.listProjects(),
  /** The projects' names, or null when the list cannot be read (callers fall back on the workspaces' projects). */
  projectNames: () => client.listProjects().then((r) => r.projects.map((p) => p.name), () => null),
  /** The project's default workspace (its conversation): the live one, or one begun now (creating, or in line). */
  ensureDefault: (project: string) => client.ensureDefault({ params: { project } }),
  getWorkspace: (slug: string) => client.getWorkspace({ params: { slug } }),
  /** Returns at once (202) with the workspace in `creating`; progress comes from the events. */
  fork: (req: ForkRequest) => client.fork({ query: { wait: 'false' }, body: req }),
  stop: (slug: string) => client.stop({ params: { slug } }),
  start: (slug: string) => client.start({ params: { slug } }),
  /** The workspace's own settings; keepCheckoutOnClose null goes back to the project's. */
  updateWorkspace: (slug: string, req: UpdateWorkspaceRequest) => client.updateWorkspace({ params: { slug }, body: req }),
  /** The project's configuration (agent, allowed paths, forge, keepCheckoutOnClose, ...). */
  projectConfig: (name: string) => client.projectConfig({ params: { project: name } }),
  /** Changes only the keys given (null: back to the default); the rest of the config stays as stored. */
  patchProjectConfig: (name: string, patch: ProjectConfigPatch) => client.patchProjectConfig({ params: { project: name }, body: patch }),
  /** The project's overlay files (local files workspaces get and commits never carry); every call answers the list. */
  overlay: (name: string) => client.overlay({ params: { project: name } }),
  /** Adds or replaces one file; 422 when overlay.files of the config does not name its path. */
  putOverlayFile: (name: string, req: PutOverlayFileRequest) => client.putOverlayFile({ params: { project: name }, body: req }),
  deleteOverlayFile: (name: string, path: string) => client.deleteOverlayFile({ params: { project: name }, query: { path } }),
  teardown: (slug: string) => client.teardown({ params: { slug } }),
  /** What a teardown would keep (branch, recovery ref) and remove, read on the host now. */
  teardownPreview: (slug: string) => client.teardownPreview({ params: { slug } }),
  /** The egress policy, whether it is the project default, and the latest gate decisions (newest first). */
  egress: (slug: string, limit = 20) => client.egress({ params: { slug }, query: { limit } }),
  /** Back to the project default policy. */
  resetEgress: (slug: string) => client.resetEgress({ params: { slug } }),
  /** Up to 1000 events of one workspace with id > after (only those of `type` when given), oldest first. */
  events: (slug: string, after?: number, type?: string) => client.events({ query: { slug, limit: 1000, after, type } }),
  thread: (slug: string) => proxied('GET', slug, '/thread', threadResponseSchema),
  /** The last user or agent message, read on the host: works while the workspace is stopped. */
  lastMessage: (slug: string) => client.lastMessage({ params: { slug } }),
  /** The newest user and agent messages (20 at most, oldest first), read on the host: the conversation while it is stopped. */
  recentMessages: (slug: string) => client.recentMessages({ params: { slug } }),
  status: (slug: string) => proxied('GET', slug, '/status', backendStatusSchema),
  postMessage: (slug: string, text: string) => proxied('POST', slug, '/messages', postMessageResponseSchema, { text }),
  /** TCP ports listening inside the sandbox, and whether each may be previewed. */
  ports: (slug: string) => proxied('GET', slug, '/ports', portsResponseSchema),
  /** A port's preview address on the preview origin (what the Preview view frames); stable across stop and reopen. */
  previewUrl: (slug: string, port: number) => client.previewUrl({ params: { slug, port } }),
  /** Stops the running turn (202); 409 invalid_state when it already ended. */
  cancelTurn: (slug: string) => proxied('POST', slug, '/turn/cancel', cancelTurnResponseSchema),
  /** The workspace's terminals (shells in its sandbox): list (for reconnect), open, close. */
  terminals: (slug: string) => proxied('GET', slug, '/terminals', terminalListResponseSchema),
  openTerminal: (slug: string, cols: number, rows: number) => proxied('POST', slug, '/terminals', createTerminalResponseSchema, { cols, rows }),
  closeTerminal: (slug: string, id: string) => proxied('DELETE', slug, `/terminals/${encodeURIComponent(id)}`, createTerminalResponseSchema),
  /** One directory of the worktree (read in the sandbox, so only while it runs), with git marks; '' is the top. */
  filesTree: (slug: string, path: string) => proxied('GET', slug, `/files/tree?path=${encodeURIComponent(path)}`, filesTreeResponseSchema),
  /** One file's text (cut at FILE_CONTENT_CAP), or only its size when it is binary. */
  fileContent: (slug: string, path: string) => proxied('GET', slug, `/files/content?path=${encodeURIComponent(path)}`, fileContentResponseSchema),
  /** The turns that changed files, newest first (works while the workspace is stopped). */
  turns: (slug: string) => client.turns({ params: { slug } }),
  turnDiff: (slug: string, n: number) => client.turnDiff({ params: { slug, n } }),
  /** Puts the files back to before the last turn that changed them; 409 while a reply runs or when nothing is left. */
  undo: (slug: string) => client.undo({ params: { slug } }),
  /** The branch plus uncommitted work against the fork point, and ahead/behind the default branch (host side). */
  diff: (slug: string, maxBytes?: number) => client.diff({ params: { slug }, query: { maxBytes } }),
  /** Commits the worktree on the branch; commit null when there was nothing to commit. */
  checkpoint: (slug: string, message?: string) => client.checkpoint({ params: { slug }, body: message ? { message } : {} }),
  /** Checkpoint, push, open (or update) the pull request. */
  publish: (slug: string, req: PublishRequest) => client.publish({ params: { slug }, body: req }),
  /** The pull request as the forge reports it now (state, its head commit's checks), null before publish. */
  pullRequest: (slug: string) => client.pullRequest({ params: { slug } }),
};

/** The WebSocket URL of a workspace's live stream, on this same origin (the cookie rides along). */
export function streamUrl(slug: string): string {
  const proto = window.location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${proto}//${window.location.host}${ws(slug)}/stream`;
}

/** The WebSocket URL of one terminal of a workspace (same origin; the cookie rides along). */
export function terminalUrl(slug: string, id: string): string {
  const proto = window.location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${proto}//${window.location.host}${ws(slug)}/terminals/${encodeURIComponent(id)}/socket`;
}

/** The stable preview address of a port in a workspace (the same across stop and reopen). */
export function previewPath(slug: string, port: number): string {
  return `${ws(slug)}/preview/${port}/`;
}
