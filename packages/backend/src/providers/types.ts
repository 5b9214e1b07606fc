import { AGENT_PROVIDERS } from '@grove/contracts';
import type { ThreadLine } from '@grove/contracts';

/** Providers this build knows; GROVE_PROVIDER must name one of them. The host checks project configs against the same list. */
export const PROVIDER_NAMES = AGENT_PROVIDERS;
export type ProviderName = (typeof PROVIDER_NAMES)[number];

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** A thread line before the store stamps it (seq, at) and the turn runner fills in the turn. */
export type NewThreadLine = DistributiveOmit<ThreadLine, 'seq' | 'at'>;

/**
 * What a provider may append. `user` lines come only from POST /messages and `turn_end` only from
 * the turn runner, so a provider cannot end a turn twice or forge user input.
 */
export type ProviderLine = Exclude<DistributiveOmit<ThreadLine, 'seq' | 'at' | 'turn'>, { kind: 'user' } | { kind: 'turn_end' }>;

export interface TurnContext {
  /** The turn id every line of this turn carries. */
  turn: string;
  /** 1-based position of this turn in the thread (the count of user lines including this one). */
  turnNumber: number;
  workspaceDir: string;
  /** Streams a chunk of assistant text to connected clients; not persisted (append an `assistant` line for that). */
  emitDelta(text: string): void;
  /** Appends (and fsyncs) a line of this turn; resolves with the stored line. */
  appendLine(line: ProviderLine): Promise<ThreadLine>;
  /** Aborted on POST /turn/cancel and when the backend shuts down; providers stop promptly and may throw the abort reason. */
  signal: AbortSignal;
}

/**
 * The agent's user. In a sandbox the backend is root holding only CAP_SETUID/SETGID/KILL; every agent process
 * (and every file write on the agent's behalf) runs as this user, which the kernel leaves with no capabilities.
 */
export interface AgentUser {
  uid: number;
  gid: number;
}

export interface TurnOutcome {
  /** `failed` after the provider appended an `error` line itself; a thrown error also fails the turn. */
  status: 'completed' | 'failed';
}

export interface Provider {
  readonly name: string;
  /** Runs one turn to the end. The turn runner appends `turn_end` afterwards, whatever happens. */
  runTurn(text: string, ctx: TurnContext): Promise<TurnOutcome>;
  /** The agent's own session id (for `--resume`), when the provider has one. */
  sessionId?(): string | null;
}
