import { z } from 'zod';

/**
 * The seam between a sandbox's backend and the host around each turn (docs/agents.md, "After a
 * turn"). When a turn's agent is done, the backend asks the host over /run/grove/host.sock
 * (POST /turn-ended) and waits: the host reverts changes outside the allowed paths and records a
 * snapshot while the workspace is still busy, so the next turn cannot start in between. The host
 * answers with what it did; the backend appends that to the thread (raw lines from provider
 * `grove`) before the turn's turn_end.
 */

export const HOST_HOOK_SOCKET = 'host.sock';
export const PROVIDER_RELAY_SOCKET = 'provider.sock';

/** The `provider` of thread lines Grove itself writes (guardrails, snapshots, undo). */
export const GROVE_LINE_PROVIDER = 'grove';

const refSchema = z.string().startsWith('refs/grove/');

/** The `event` of a raw line from provider `grove`. */
export const groveThreadEventSchema = z.discriminatedUnion('type', [
  /** Changes outside the project's allowed paths, undone after the turn. */
  z.object({
    type: z.literal('paths_reverted'),
    allowedPaths: z.array(z.string()),
    paths: z.array(z.object({ path: z.string(), action: z.enum(['restored', 'removed']) })),
  }),
  /** The worktree after the turn, recorded on refs/grove/<slug>/turns/<n>. */
  z.object({ type: z.literal('snapshot'), ref: refSchema, commit: z.string(), files: z.array(z.string()) }),
  /** POST /api/workspaces/:slug/undo put the worktree back to how it was before turn `undoneTurn`. */
  z.object({ type: z.literal('undo'), undoneTurn: z.string(), ref: refSchema, restored: z.string(), files: z.array(z.string()) }),
  /** The host could not run its after-turn checks (the turn's changes stay as they are). */
  z.object({ type: z.literal('host_unavailable'), message: z.string() }),
]);
export type GroveThreadEvent = z.infer<typeof groveThreadEventSchema>;

/** Backend -> host, POST /turn-ended on host.sock. */
export const turnOutcomeSchema = z.enum(['completed', 'failed', 'cancelled']);
export type TurnOutcomeStatus = z.infer<typeof turnOutcomeSchema>;

/** The longest error text a turn report carries; the registry keeps a shorter one (shortTurnError). */
export const TURN_REPORT_ERROR_MAX = 2000;

/**
 * Backend -> host, POST /turn-ended on host.sock. The fields after `status` are optional so a backend of an
 * older image (a container started before an upgrade) still reports; the host fills them in.
 */
export const turnEndedRequestSchema = z
  .object({
    turn: z.string().min(1).max(64),
    status: turnOutcomeSchema,
    /** A failed turn: the message of its (last) error line. */
    error: z.string().max(TURN_REPORT_ERROR_MAX).optional(),
    /** The agent now waits for the user's next message (every provider today: a completed turn). */
    waitingForUser: z.boolean().optional(),
    /** The backend is shutting down (stop, teardown): the turn was cut; the host records it and does no after-turn work. */
    shutdown: z.boolean().optional(),
  })
  .strict();
export type TurnEndedRequest = z.infer<typeof turnEndedRequestSchema>;

/** The longest error text in a `turn.ended` event: one line, enough for a badge, a card and a notification. */
export const TURN_ERROR_SHORT_MAX = 160;

/** The first non-empty line of an error, cut to TURN_ERROR_SHORT_MAX characters (with an ellipsis when cut). */
export function shortTurnError(message: string): string {
  // Control characters (an agent's ANSI colours, a bell, C1 ones too) become spaces: the text lands in badges,
  // notifications and `grove logs`.
  const printable = (l: string): string => [...l].map((c) => (c.charCodeAt(0) < 0x20 || (c.charCodeAt(0) >= 0x7f && c.charCodeAt(0) <= 0x9f) ? ' ' : c)).join('');
  const line =
    message
      .split(/\r?\n/)
      .map((l) => printable(l).trim())
      .find((l) => l !== '') ?? '';
  const chars = [...line];
  return chars.length <= TURN_ERROR_SHORT_MAX ? line : `${chars.slice(0, TURN_ERROR_SHORT_MAX - 1).join('').trimEnd()}…`;
}

/**
 * data of a `turn.ended` event (written by core when the backend reports a turn's end): how the turn ended, its
 * error's short message when it failed, whether the agent now waits for the user, and whether the turn was cut
 * by the workspace stopping. Extra fields (workspaceId) are allowed.
 */
export const turnEndedDataSchema = z.object({
  turn: z.string(),
  outcome: turnOutcomeSchema,
  error: z.string().max(TURN_ERROR_SHORT_MAX).nullable(),
  waitingForUser: z.boolean(),
  shutdown: z.boolean(),
});
export type TurnEndedData = z.infer<typeof turnEndedDataSchema>;

export const turnEndedResponseSchema = z.object({ events: z.array(groveThreadEventSchema) });
export type TurnEndedResponse = z.infer<typeof turnEndedResponseSchema>;

/** Host -> backend, POST /notes: a grove line appended to the thread (the undo marker). */
export const noteRequestSchema = z.object({ turn: z.string().min(1).max(64), event: groveThreadEventSchema }).strict();
export type NoteRequest = z.infer<typeof noteRequestSchema>;

/**
 * Host -> backend, POST /hold: refuse new turns (409) until released or until ttlMs passed, so
 * the host can change the worktree (undo) without an agent running. 409 when a turn is running.
 */
export const holdRequestSchema = z.object({ reason: z.string().min(1).max(200), ttlMs: z.number().int().min(100).max(300_000) }).strict();
export type HoldRequest = z.infer<typeof holdRequestSchema>;
export const holdResponseSchema = z.object({ hold: z.string() });
export type HoldResponse = z.infer<typeof holdResponseSchema>;
export const releaseHoldRequestSchema = z.object({ hold: z.string().min(1) }).strict();

/** 200 from POST /api/workspaces/:slug/undo. */
export const undoResponseSchema = z.object({
  undone: z.object({ turn: z.string(), ref: z.string(), files: z.array(z.string()) }),
  /** Snapshots still available to undo after this one. */
  remaining: z.number().int().nonnegative(),
});
export type UndoResponse = z.infer<typeof undoResponseSchema>;

/**
 * A turn number in a URL (`/turns/:n/diff`): a positive integer written plainly, no sign, no
 * leading zero, no exponent, so one number has one spelling.
 */
export const turnNumberSchema = z
  .string()
  .regex(/^[1-9][0-9]{0,8}$/, 'a turn number is a positive integer, as in /turns/3/diff')
  .transform(Number);

/** One file a turn changed, relative to the state before the turn. */
export const turnFileSchema = z.object({
  path: z.string(),
  status: z.enum(['added', 'modified', 'deleted', 'type_changed']),
  /** Lines added and removed; null for a binary file. */
  added: z.number().int().nonnegative().nullable(),
  removed: z.number().int().nonnegative().nullable(),
});
export type TurnFile = z.infer<typeof turnFileSchema>;

/** One turn that changed files or had changes reverted, from GET /api/workspaces/:slug/turns. */
export const turnSummarySchema = z.object({
  n: z.number().int().positive(),
  /** The thread's turn id, `turn-<n>`. */
  turn: z.string(),
  /** When the snapshot (or, without one, the revert) was recorded. */
  at: z.string(),
  /** A snapshot exists (refs/grove/<slug>/turns/<n> or, once undone, undone/<n>): files and a diff. */
  recorded: z.boolean(),
  files: z.array(turnFileSchema),
  /** Changes outside the project's allowed paths that were put back when the turn ended. */
  reverted: z.array(z.object({ path: z.string(), action: z.enum(['restored', 'removed']) })),
  allowedPaths: z.array(z.string()),
  /** Its changes were undone (POST /undo). */
  undone: z.boolean(),
  /** The turn POST /undo would undo next: the newest snapshot still on the stack. */
  undoNext: z.boolean(),
});
export type TurnSummary = z.infer<typeof turnSummarySchema>;

/** 200 from GET /api/workspaces/:slug/turns: newest first. */
export const turnsResponseSchema = z.object({ turns: z.array(turnSummarySchema) });
export type TurnsResponse = z.infer<typeof turnsResponseSchema>;

/** 200 from GET /api/workspaces/:slug/turns/:n/diff: the unified diff from the state before the turn to after it. */
export const turnDiffResponseSchema = z.object({
  n: z.number().int().positive(),
  turn: z.string(),
  diff: z.string(),
  /** The diff was longer than `limitBytes` and was cut at a line end. */
  truncated: z.boolean(),
  limitBytes: z.number().int().positive(),
});
export type TurnDiffResponse = z.infer<typeof turnDiffResponseSchema>;
