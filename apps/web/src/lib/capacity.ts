// The concurrency cap in words: whether a new sandbox fits, and if not, why and what to do about it.
import type { Capacity, Workspace } from '@grove/contracts';

/** No slot for a new sandbox now: all are in use, or others already wait in line (nobody jumps it). */
export function isFull(c: Capacity): boolean {
  return c.running + c.creating >= c.cap || c.queued > 0;
}

/** Names of the running workspaces, the ones the reader can stop or tear down to make room. */
export function runningNames(workspaces: Workspace[]): string[] {
  return workspaces.filter((w) => w.state === 'running' || w.state === 'creating').map((w) => (w.isDefault ? `${w.project} (default)` : w.name));
}

/** The one sentence shown on the disabled fork button, above the cards, and for a 429. */
export function capacityReason(c: Pick<Capacity, 'running' | 'cap'> & { creating?: number }, workspaces: Workspace[]): string {
  const starting = c.creating ? `, ${c.creating} starting` : '';
  const names = runningNames(workspaces);
  const way = names.length ? `Stop or tear down one of: ${names.join(', ')}.` : 'Stop or tear down a running workspace.';
  return `All ${c.cap} sandboxes are in use (${c.running} running${starting}). ${way}`;
}

/**
 * The same refusal for the default conversation's reader, who never runs workspaces and is not the one to stop
 * them: no sandboxes, no tear down, and what they can do.
 */
export const BUSY_FOR_EVERYONE = 'Every agent Grove can run is busy right now. Try again in a few minutes; if it keeps happening, tell whoever runs Grove.';

/** Sort for the cards: the default workspace first, then the most recently active. */
export function byActivity(a: Workspace, b: Workspace): number {
  if (a.isDefault !== b.isDefault) return a.isDefault ? -1 : 1;
  const ta = Date.parse(a.lastActivityAt ?? a.updatedAt);
  const tb = Date.parse(b.lastActivityAt ?? b.updatedAt);
  return (Number.isNaN(tb) ? 0 : tb) - (Number.isNaN(ta) ? 0 : ta);
}

/** A project's default conversation as everyone sees it (`/` opens the first project's). */
export function conversationHref(project: string): string {
  return `/?project=${encodeURIComponent(project)}`;
}

export function workspaceHref(w: Pick<Workspace, 'project' | 'name'>): string {
  return `/p/${encodeURIComponent(w.project)}/w/${encodeURIComponent(w.name)}`;
}
