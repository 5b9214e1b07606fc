import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { GroveError, holdResponseSchema, parseOrThrow, projectConfigSchema } from '@grove/contracts';
import type { EventType, GroveThreadEvent, ProjectConfig, TurnEndedRequest, TurnEndedResponse, UndoResponse } from '@grove/contracts';
import type { WorkspaceRow } from '@grove/db';
import type { Logger } from 'pino';
import { overSocket } from './health.ts';
import type { GrovePaths } from './paths.ts';
import { recordSnapshot, revertOutsideAllowed, undoLast } from './turn-snapshots.ts';
import type { WorktreeContext } from './turn-snapshots.ts';

/**
 * Agents on the host side (docs/agents.md): the per-project config file, the environment it gives a
 * sandbox, and the work around each turn - allowed-paths reverts and snapshots when the backend
 * reports a finished turn, and undo.
 */

/** `<home>/config/<project>.json`; a missing file is the defaults. Throws invalid_input naming the file and the rule. */
async function readConfigJson(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw err;
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new GroveError('invalid_input', `project config ${file} is not valid JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** A project's config with its defaults applied (`{}` when it has no file). */
export async function readProjectConfig(file: string): Promise<ProjectConfig> {
  return parseOrThrow(projectConfigSchema, await readConfigJson(file), { what: `project config ${file}` });
}

/** The config file as stored, checked against the schema but without the defaults: what a PATCH changes. */
export async function readStoredProjectConfig(file: string): Promise<Record<string, unknown>> {
  const json = await readConfigJson(file);
  parseOrThrow(projectConfigSchema, json, { what: `project config ${file}` });
  return json as Record<string, unknown>;
}

/**
 * Validates, then replaces the file atomically with what was given: defaults are applied when it is read,
 * never written, so a later change of a default reaches every project that did not choose otherwise.
 */
export async function writeProjectConfig(file: string, config: unknown): Promise<ProjectConfig> {
  const parsed = parseOrThrow(projectConfigSchema, config, { what: 'project config' });
  await mkdir(dirname(file), { recursive: true });
  const tmp = `${file}.tmp`;
  await writeFile(tmp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o644 });
  await rename(tmp, file);
  return parsed;
}

/** What a project's config adds to its sandboxes' environment. Never secrets: the schema refuses them. */
export function agentSandboxEnv(config: ProjectConfig): Record<string, string> {
  if (!config.agent) return {};
  return { GROVE_PROVIDER: config.agent.provider, GROVE_AGENT_CONFIG: JSON.stringify(config.agent) };
}

export interface TurnGuardDeps {
  paths: GrovePaths;
  /** Runs fn under the project's repository lock. */
  withLock<T>(project: string, fn: () => Promise<T>): Promise<T>;
  log: Logger;
  /** Record an event; resolves once it is in the audit trail (GET /turns reads them). */
  emit(slug: string, type: EventType, data: Record<string, unknown>): Promise<unknown>;
  /** The live row of a slug, if any. */
  live(slug: string): Promise<WorkspaceRow | undefined>;
  /** Owner for files the host writes into worktrees (null when the host cannot chown). */
  owner: { uid: number; gid: number } | null;
  /** After a turn that changed files was snapshotted (the checkpoint after a turn, docs/git-flow.md). Never throws. */
  afterSnapshot?(slug: string, turn: string, files: string[]): Promise<void>;
  /** After an undo restored files (the checkpoint of the undo); never throws. */
  afterUndo?(slug: string, turn: string, files: string[]): Promise<void>;
}

const TURN_ID = /^turn-([1-9][0-9]{0,8})$/;
/** How long the backend refuses new turns while an undo runs, at most (released as soon as it is done). */
const UNDO_HOLD_MS = 120_000;

export class TurnGuard {
  constructor(private readonly deps: TurnGuardDeps) {}

  private context(row: WorkspaceRow): WorktreeContext {
    return {
      repo: this.deps.paths.repo(row.project),
      objects: this.deps.paths.workspaceObjects(row.slug),
      worktree: this.deps.paths.worktree(row.project, row.name),
      slug: row.slug,
      branch: row.branch,
      ...(this.deps.owner ? { owner: this.deps.owner } : {}),
    };
  }

  private async row(slug: string): Promise<WorkspaceRow> {
    const row = await this.deps.live(slug);
    if (!row) throw new GroveError('workspace_not_found', `no workspace "${slug}"`, { details: { slug } });
    return row;
  }

  /** Called by the backend (host.sock) when a turn's agent is done; the workspace is still busy meanwhile. */
  async onTurnEnded(slug: string, req: TurnEndedRequest): Promise<TurnEndedResponse> {
    const row = await this.row(slug);
    const match = TURN_ID.exec(req.turn);
    if (!match?.[1]) throw new GroveError('invalid_input', `turn id "${req.turn}" is not turn-<n>`);
    const n = Number(match[1]);
    const config = await readProjectConfig(this.deps.paths.projectConfig(row.project));
    const ctx = this.context(row);
    const t0 = Date.now();
    const { reverted, snapshot } = await this.deps.withLock(row.project, async () => ({
      reverted: await revertOutsideAllowed(ctx, config.allowedPaths),
      snapshot: await recordSnapshot(ctx, { n, turn: req.turn }),
    }));
    const events: GroveThreadEvent[] = [];
    if (reverted.length > 0) {
      events.push({ type: 'paths_reverted', allowedPaths: config.allowedPaths ?? [], paths: reverted });
      await this.deps.emit(slug, 'turn.reverted', { workspaceId: row.id, turn: req.turn, allowedPaths: config.allowedPaths ?? [], paths: reverted });
    }
    if (snapshot) {
      events.push({ type: 'snapshot', ref: snapshot.ref, commit: snapshot.commit, files: snapshot.files });
      await this.deps.emit(slug, 'turn.snapshot', { workspaceId: row.id, turn: req.turn, ref: snapshot.ref, commit: snapshot.commit, files: snapshot.files.length });
    }
    // Nested repositories are never entered, so never saved: the user learns which were left out.
    if (snapshot?.embedded.length) this.deps.log.info({ slug, turn: req.turn, embedded: snapshot.embedded }, `the snapshot of ${req.turn} leaves out embedded repositories (kept as the branch has them): ${snapshot.embedded.join(', ')}`);
    if (snapshot) await this.deps.afterSnapshot?.(slug, req.turn, snapshot.files);
    this.deps.log.debug({ slug, turn: req.turn, status: req.status, reverted: reverted.length, snapshot: snapshot?.ref ?? null, ms: Date.now() - t0 }, 'after-turn checks');
    return { events };
  }

  /**
   * Restores the worktree to how it was before the newest snapshot's turn. The backend is held
   * meanwhile (no turn may start), and the thread gets an undo marker. Repeatable: each call goes
   * one changing turn further back.
   */
  async undo(slug: string): Promise<UndoResponse> {
    const row = await this.row(slug);
    if (row.state !== 'running') {
      throw new GroveError('workspace_stopped', `workspace "${slug}" is ${row.state}: reopen it to undo (the thread records the undo)`, { details: { slug, state: row.state } });
    }
    const socket = this.deps.paths.socket(slug);
    const held = await postJson(socket, '/hold', { reason: 'an undo is restoring files', ttlMs: UNDO_HOLD_MS });
    if (held.status === 409) {
      throw new GroveError('invalid_state', `cannot undo in "${slug}" while a turn is running; wait for it or cancel it`, { details: { slug } });
    }
    if (held.status !== 200) throw new GroveError('backend_unavailable', `the backend of "${slug}" refused the hold (${held.status})`, { details: { slug } });
    const { hold } = holdResponseSchema.parse(held.body);
    try {
      const ctx = this.context(row);
      const result = await this.deps.withLock(row.project, () => undoLast(ctx));
      if (!result) throw new GroveError('invalid_state', `nothing to undo in "${slug}": no turn has changed files since it was created (or every change was undone)`, { details: { slug } });
      const turn = `turn-${result.n}`;
      const event: GroveThreadEvent = { type: 'undo', undoneTurn: turn, ref: result.ref, restored: result.restored, files: result.files };
      const note = await postJson(socket, '/notes', { turn, event });
      if (note.status !== 201) this.deps.log.warn({ slug, status: note.status }, 'the undo marker could not be added to the thread');
      await this.deps.emit(slug, 'workspace.undo', { workspaceId: row.id, turn, ref: result.ref, restored: result.restored, files: result.files.length, remaining: result.remaining });
      // Still under the hold: no turn may write while the undo is committed.
      await this.deps.afterUndo?.(slug, turn, result.files);
      return { undone: { turn, ref: result.ref, files: result.files }, remaining: result.remaining };
    } finally {
      await postJson(socket, '/hold/release', { hold }).catch((err: unknown) => this.deps.log.warn({ err, slug }, 'could not release the hold; it expires by itself'));
    }
  }
}

/** POST JSON to a backend over its Unix socket; a backend that does not answer is backend_unavailable. */
function postJson(socketPath: string, path: string, body: unknown, timeoutMs = 10_000): Promise<{ status: number; body: unknown }> {
  return overSocket(socketPath, { method: 'POST', path, body, timeoutMs }).catch((err: NodeJS.ErrnoException) => {
    throw new GroveError('backend_unavailable', `the backend socket ${socketPath} did not answer: ${err.code ?? err.message}`, { cause: err });
  });
}
