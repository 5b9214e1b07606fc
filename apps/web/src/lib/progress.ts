// A fork's or a reopen's progress, read from its audit events.
//   fork:  reserved -> prepared -> sandbox started -> registered, or spawn_failed
//   start: reserved -> sandbox started -> started, or spawn_failed
import type { BaseFallbackData, GroveEvent } from '@grove/contracts';
import { baseFallbackOf } from './base.ts';

export interface Phase {
  type: string;
  label: string;
}

export const PHASES = [
  { type: 'workspace.reserved', label: 'Slot reserved' },
  { type: 'workspace.prepared', label: 'Worktree and branch ready' },
  { type: 'sandbox.started', label: 'Sandbox started' },
  { type: 'workspace.registered', label: 'Agent ready' },
] as const satisfies readonly Phase[];

/** Reopening a stopped workspace: its worktree is already there, so there is no "prepared" step. */
export const START_PHASES = [
  { type: 'workspace.reserved', label: 'Slot reserved' },
  { type: 'sandbox.started', label: 'Sandbox started' },
  { type: 'workspace.started', label: 'Agent ready' },
] as const satisfies readonly Phase[];

export type Operation = 'fork' | 'start';

export interface ForkProgress {
  /** How many phases are done, in order (0..phases.length). */
  reached: number;
  failed: string | null;
  done: boolean;
}

export interface LifecycleProgress extends ForkProgress {
  op: Operation;
  phases: readonly Phase[];
  /** This fork could not start where it was asked to (a pull request's head) and started at the default branch. */
  baseFallback: BaseFallbackData | null;
}

/** The reason a failure event gives, whatever field it chose. */
export function reasonOf(e: GroveEvent): string {
  const d = e.data;
  for (const k of ['reason', 'message', 'error']) {
    const v = d[k];
    if (typeof v === 'string' && v) return v;
  }
  return 'the workspace could not be started (no reason was recorded)';
}

/**
 * Only the events since the latest reservation count: a name used before (then torn down), or a
 * workspace stopped and reopened, has earlier attempts' events under the same slug.
 */
function sinceLatestReservation(events: GroveEvent[]): GroveEvent[] {
  for (let i = events.length - 1; i >= 0; i--) {
    if (events[i]?.type === 'workspace.reserved') return events.slice(i);
  }
  return events;
}

function count(recent: GroveEvent[], phases: readonly Phase[]): ForkProgress {
  const seen = new Set(recent.map((e) => e.type));
  const failure = recent.find((e) => e.type === 'spawn_failed');
  let reached = 0;
  for (const p of phases) {
    if (!seen.has(p.type)) break;
    reached += 1;
  }
  return { reached, failed: failure ? reasonOf(failure) : null, done: reached === phases.length };
}

export function forkProgress(events: GroveEvent[]): ForkProgress {
  return count(sinceLatestReservation(events), PHASES);
}

/** Which operation the latest reservation started ('fork' when there is none yet). */
export function operationOf(events: GroveEvent[]): Operation {
  const reserved = sinceLatestReservation(events)[0];
  return reserved?.type === 'workspace.reserved' && reserved.data.op === 'start' ? 'start' : 'fork';
}

/** The progress of whatever the latest reservation started, fork or reopen, with its own phases. */
export function lifecycleProgress(events: GroveEvent[], expect?: Operation): LifecycleProgress {
  const op = expect ?? operationOf(events);
  const phases = op === 'start' ? START_PHASES : PHASES;
  const recent = sinceLatestReservation(events);
  return { op, phases, ...count(recent, phases), baseFallback: baseFallbackOf(recent) };
}
