import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { GroveError, holdResponseSchema, parseOrThrow, projectConfigSchema, shortTurnError } from '@grove/contracts';
import type { GroveThreadEvent, ProjectConfig, TurnEndedData, TurnEndedRequest, TurnEndedResponse, UndoResponse } from '@grove/contracts';
import type { WorkspaceRow } from '@grove/db';
import { overSocket } from '@grove/runtime';
import { notFound } from './context.ts';
import type { GroveContext } from './context.ts';
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

/** The checkpoints after a turn that changed files and after an undo (git-flow.ts); never throw. */
export interface TurnCheckpoints {
  checkpointAfterTurn(slug: string, turn: string, files: string[], config?: ProjectConfig): Promise<void>;
  checkpointAfterUndo(slug: string, turn: string, files: string[], config?: ProjectConfig): Promise<void>;
}

export interface TurnGuardOptions {
  /** Owner for files the host writes into worktrees (null when the host cannot chown). */
  owner: { uid: number; gid: number } | null;
  /** Absent: no checkpoint follows a turn or an undo. */
  checkpoints?: TurnCheckpoints;
}

const TURN_ID = /^turn-([1-9][0-9]{0,8})$/;
/** How long the backend refuses new turns while an undo runs, at most (released as soon as it is done). */
const UNDO_HOLD_MS = 120_000;

export class TurnGuard {
  constructor(
    private readonly ctx: GroveContext,
    private readonly o: TurnGuardOptions,
  ) {}

  private context(row: WorkspaceRow): WorktreeContext {
    return {
      repo: this.ctx.paths.repo(row.project),
      objects: this.ctx.paths.workspaceObjects(row.slug),
      worktree: this.ctx.paths.worktree(row.project, row.name),
      slug: row.slug,
      branch: row.branch,
      ...(this.o.owner ? { owner: this.o.owner } : {}),
    };
  }

  private async row(slug: string): Promise<WorkspaceRow> {
    const row = await this.ctx.store.live(slug);
    if (!row) throw notFound(slug);
    return row;
  }

  /** Called by the backend (host.sock) when a turn's agent is done; the workspace is still busy meanwhile. */
  async onTurnEnded(slug: string, req: TurnEndedRequest): Promise<TurnEndedResponse> {
    const row = await this.row(slug);
    const match = TURN_ID.exec(req.turn);
    if (!match?.[1]) throw new GroveError('invalid_input', `turn id "${req.turn}" is not turn-<n>`);
    const n = Number(match[1]);
    // A turn cut by a stop: the sandbox is going away and the stop must not wait for a snapshot, so only its end is recorded.
    if (req.shutdown === true) {
      await this.recordTurnEnded(row, req);
      return { events: [] };
    }
    try {
      return await this.afterTurn(row, req, n);
    } finally {
      // Written after the after-turn work (or its failure): "the turn is over" means its snapshot is there too.
      await this.recordTurnEnded(row, req);
    }
  }

  /** The `turn.ended` event: what the dashboard's badges and notifications show. Never throws. */
  private async recordTurnEnded(row: WorkspaceRow, req: TurnEndedRequest): Promise<void> {
    const data: TurnEndedData = {
      turn: req.turn,
      outcome: req.status,
      // Only a failed turn has an error; a failed turn without a message still says it failed.
      error: req.status === 'failed' ? shortTurnError(req.error ?? '') || null : null,
      // An older backend does not say: every provider it had waits for the user after a completed turn.
      waitingForUser: req.shutdown === true ? false : (req.waitingForUser ?? req.status === 'completed'),
      shutdown: req.shutdown === true,
    };
    await this.ctx.emit(row.slug, 'turn.ended', { workspaceId: row.id, ...data }).catch((err: unknown) => this.ctx.log.error({ err, slug: row.slug, turn: req.turn }, 'could not record turn.ended'));
  }

  private async afterTurn(row: WorkspaceRow, req: TurnEndedRequest, n: number): Promise<TurnEndedResponse> {
    const { slug } = row;
    const config = await readProjectConfig(this.ctx.paths.projectConfig(row.project));
    const ctx = this.context(row);
    const t0 = Date.now();
    const { reverted, snapshot } = await this.ctx.lock.withLock(row.project, async () => ({
      reverted: await revertOutsideAllowed(ctx, config.allowedPaths),
      snapshot: await recordSnapshot(ctx, { n, turn: req.turn }),
    }));
    const events: GroveThreadEvent[] = [];
    if (reverted.length > 0) {
      events.push({ type: 'paths_reverted', allowedPaths: config.allowedPaths ?? [], paths: reverted });
      await this.ctx.emit(slug, 'turn.reverted', { workspaceId: row.id, turn: req.turn, allowedPaths: config.allowedPaths ?? [], paths: reverted });
    }
    if (snapshot) {
      events.push({ type: 'snapshot', ref: snapshot.ref, commit: snapshot.commit, files: snapshot.files });
      await this.ctx.emit(slug, 'turn.snapshot', { workspaceId: row.id, turn: req.turn, ref: snapshot.ref, commit: snapshot.commit, files: snapshot.files.length });
    }
    // Nested repositories are never entered, so never saved: the user learns which were left out.
    if (snapshot?.embedded.length) this.ctx.log.info({ slug, turn: req.turn, embedded: snapshot.embedded }, `the snapshot of ${req.turn} leaves out embedded repositories (kept as the branch has them): ${snapshot.embedded.join(', ')}`);
    if (snapshot) await this.o.checkpoints?.checkpointAfterTurn(slug, req.turn, snapshot.files, config);
    this.ctx.log.debug({ slug, turn: req.turn, status: req.status, reverted: reverted.length, snapshot: snapshot?.ref ?? null, ms: Date.now() - t0 }, 'after-turn checks');
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
    const socket = this.ctx.paths.socket(slug);
    const held = await postJson(socket, '/hold', { reason: 'an undo is restoring files', ttlMs: UNDO_HOLD_MS });
    if (held.status === 409) {
      throw new GroveError('invalid_state', `cannot undo in "${slug}" while a turn is running; wait for it or cancel it`, { details: { slug } });
    }
    if (held.status !== 200) throw new GroveError('backend_unavailable', `the backend of "${slug}" refused the hold (${held.status})`, { details: { slug } });
    const { hold } = holdResponseSchema.parse(held.body);
    try {
      const ctx = this.context(row);
      const result = await this.ctx.lock.withLock(row.project, () => undoLast(ctx));
      if (!result) throw new GroveError('invalid_state', `nothing to undo in "${slug}": no turn has changed files since it was created (or every change was undone)`, { details: { slug } });
      const turn = `turn-${result.n}`;
      const event: GroveThreadEvent = { type: 'undo', undoneTurn: turn, ref: result.ref, restored: result.restored, files: result.files };
      const note = await postJson(socket, '/notes', { turn, event });
      if (note.status !== 201) this.ctx.log.warn({ slug, status: note.status }, 'the undo marker could not be added to the thread');
      await this.ctx.emit(slug, 'workspace.undo', { workspaceId: row.id, turn, ref: result.ref, restored: result.restored, files: result.files.length, remaining: result.remaining });
      // Still under the hold: no turn may write while the undo is committed.
      await this.o.checkpoints?.checkpointAfterUndo(slug, turn, result.files);
      return { undone: { turn, ref: result.ref, files: result.files }, remaining: result.remaining };
    } finally {
      await postJson(socket, '/hold/release', { hold }).catch((err: unknown) => this.ctx.log.warn({ err, slug }, 'could not release the hold; it expires by itself'));
    }
  }
}

/** POST JSON to a backend over its Unix socket; a backend that does not answer is backend_unavailable. */
function postJson(socketPath: string, path: string, body: unknown, timeoutMs = 10_000): Promise<{ status: number; body: unknown }> {
  return overSocket(socketPath, { method: 'POST', path, body, timeoutMs }).catch((err: NodeJS.ErrnoException) => {
    throw new GroveError('backend_unavailable', `the backend socket ${socketPath} did not answer: ${err.code ?? err.message}`, { cause: err });
  });
}
