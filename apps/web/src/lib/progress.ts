// A fork's progress, read from its audit events: reserved -> prepared -> sandbox started -> registered, or spawn_failed.
import type { GroveEvent } from '@grove/contracts';

export const PHASES = [
  { type: 'workspace.reserved', label: 'Slot reserved' },
  { type: 'workspace.prepared', label: 'Worktree and branch ready' },
  { type: 'sandbox.started', label: 'Sandbox started' },
  { type: 'workspace.registered', label: 'Agent ready' },
] as const;

export interface ForkProgress {
  /** How many phases are done, in order (0..PHASES.length). */
  reached: number;
  failed: string | null;
  done: boolean;
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
 * Only the events since the latest reservation count: a name used before (then torn down) has the older
 * attempt's events under the same slug.
 */
export function forkProgress(events: GroveEvent[]): ForkProgress {
  let start = -1;
  for (let i = events.length - 1; i >= 0; i--) {
    if (events[i]?.type === 'workspace.reserved') {
      start = i;
      break;
    }
  }
  const recent = start < 0 ? events : events.slice(start);
  const seen = new Set(recent.map((e) => e.type));
  const failure = recent.find((e) => e.type === 'spawn_failed');
  let reached = 0;
  for (const p of PHASES) {
    if (!seen.has(p.type)) break;
    reached += 1;
  }
  return { reached, failed: failure ? reasonOf(failure) : null, done: reached === PHASES.length };
}
