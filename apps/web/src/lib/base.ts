// Where a workspace started: a pull request's head in words, and a fork that could not start where it was
// asked to (the `workspace.base_fallback` event: no such pull request, no remote, unreachable) put into words.
import { baseFallbackDataSchema, type BaseFallbackData, type GroveEvent } from '@grove/contracts';

/** Core fetches a pull request's head to refs/grove-pr/<n>/head and forks from there (docs/git-flow.md). */
const PULL_HEAD = /^refs\/grove-pr\/([1-9][0-9]*)\/head$/;

/** "pull request #7" for a pull request's head, the ref itself otherwise (a branch, a commit, a recovery ref). */
export function baseLabel(baseRef: string): string {
  const m = PULL_HEAD.exec(baseRef);
  return m ? `pull request #${m[1]}` : baseRef;
}

/**
 * The newest fallback among `events`, or null. `since` (an ISO time, the workspace's createdAt) leaves out
 * the events of an earlier workspace of the same name, torn down since: they share its slug.
 */
export function baseFallbackOf(events: GroveEvent[], since?: string): BaseFallbackData | null {
  const from = since === undefined ? Number.NEGATIVE_INFINITY : Date.parse(since);
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i];
    if (e?.type !== 'workspace.base_fallback' || Date.parse(e.at) < from) continue;
    const data = baseFallbackDataSchema.safeParse(e.data);
    if (data.success) return data.data;
  }
  return null;
}

/** "Started at main instead of pull request #7: <reason>". */
export function fallbackSentence(f: BaseFallbackData): string {
  return `Started at ${f.base} instead of ${f.wanted}: ${f.reason}`;
}
