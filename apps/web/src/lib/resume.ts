// The /resume picker's logic: which workspaces it offers, in which order, and the line it quotes.
import type { LastMessage, Workspace } from '@grove/contracts';

/** Typed alone in a composer, this opens the picker instead of being sent. */
export const RESUME_COMMAND = '/resume';

export function isResumeCommand(text: string): boolean {
  return text.trim().toLowerCase() === RESUME_COMMAND;
}

function activity(w: Workspace): number {
  const t = Date.parse(w.lastActivityAt ?? w.updatedAt);
  return Number.isNaN(t) ? 0 : t;
}

/**
 * Workspaces one can go back to, most recently active first: everything still there (gone and
 * tearing-down ones are not), of one project when a project is given.
 */
export function resumeCandidates(workspaces: readonly Workspace[], project?: string | null): Workspace[] {
  return workspaces
    .filter((w) => w.state !== 'gone' && w.state !== 'tearing-down' && (!project || w.project === project))
    .sort((a, b) => activity(b) - activity(a) || a.slug.localeCompare(b.slug));
}

/** Case-insensitive match on the name, the project and the branch. */
export function matchesQuery(w: Workspace, query: string): boolean {
  const q = query.trim().toLowerCase();
  if (!q) return true;
  return [w.name, w.project, w.branch].some((s) => s.toLowerCase().includes(q));
}

/** The last thing said in a workspace, as the picker and the cards show it. */
export interface Quote {
  who: 'user' | 'agent';
  text: string;
}

/** The last thing said in a workspace (`GET …/last-message`), on one line and at most `max` characters. */
export function quoteOf(m: Pick<LastMessage, 'who' | 'text'> | null, max = 120): Quote | null {
  if (!m) return null;
  const flat = m.text.replace(/\s+/g, ' ').trim();
  if (!flat) return null;
  return { who: m.who, text: flat.length > max ? `${flat.slice(0, max - 1).trimEnd()}…` : flat };
}

/** Who said it, in the reader's words: "You: …" or "Agent: …". */
export function quoteLine(q: Quote): string {
  return `${q.who === 'user' ? 'You' : 'Agent'}: ${q.text}`;
}
