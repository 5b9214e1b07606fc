// Pure helpers of the Review view: the checks of a pull request in words, and what the end of a pull request does
// (or did) to the workspace, from its keepCheckoutOnClose and its audit trail.
import { prStateDataSchema, type GroveEvent, type PullRequest, type PullRequestChecks, type PullRequestResponse } from '@grove/contracts';
import { explainGitError, type ErrorLike, type Explained } from './git-changes.ts';

/** Events after which the pull request (state, cleanup) is read again; checks themselves are read on demand. */
const PR_EVENTS = new Set(['workspace.published', 'workspace.pr_state', 'workspace.kept', 'workspace.cleaned']);

export function refreshesPullRequest(e: GroveEvent, slug: string): boolean {
  return e.slug === slug && PR_EVENTS.has(e.type);
}

export const CHECKS_LABEL: Record<PullRequestChecks['state'], string> = { success: 'passing', failure: 'failing', pending: 'running', none: 'no checks' };
export const CHECK_LABEL: Record<PullRequestChecks['checks'][number]['state'], string> = { success: 'passed', failure: 'failed', pending: 'running' };

/** "1 failed, 2 passed", "1 running", or "none reported". */
export function checksCounts(c: PullRequestChecks): string {
  if (c.total === 0) return 'none reported';
  const parts = [
    [c.failure, 'failed'],
    [c.pending, 'running'],
    [c.success, 'passed'],
  ] as const;
  return parts
    .filter(([n]) => n > 0)
    .map(([n, w]) => `${n} ${w}`)
    .join(', ');
}

/** What the watcher did once the pull request ended, read from the trail; null while it has not acted yet. */
export type CleanupOutcome = { kind: 'cleaned' } | { kind: 'cleaning' } | { kind: 'kept' } | { kind: 'held'; reason: string };

/**
 * The outcome of the latest end of the pull request: the newest `workspace.pr_state` to merged or closed (since the
 * workspace's createdAt: an earlier workspace of the same name shares the slug), then a `workspace.cleaned` after it.
 * A hold that ended later cleans up without another pr_state, so a cleaned event after it wins over the hold.
 */
export function cleanupOutcome(events: GroveEvent[], since: string): CleanupOutcome | null {
  const from = Date.parse(since);
  const mine = events.filter((e) => Date.parse(e.at) >= from).sort((a, b) => a.id - b.id);
  let ended: { id: number; cleanup: boolean; held: string | undefined } | null = null;
  for (const e of mine) {
    if (e.type !== 'workspace.pr_state') continue;
    const d = prStateDataSchema.safeParse(e.data);
    if (!d.success) continue;
    ended = d.data.to === 'open' ? null : { id: e.id, cleanup: d.data.cleanup, held: d.data.held };
  }
  if (!ended) return null;
  const after = ended.id;
  if (mine.some((e) => e.id > after && e.type === 'workspace.cleaned')) return { kind: 'cleaned' };
  if (ended.held) return { kind: 'held', reason: ended.held };
  return ended.cleanup ? { kind: 'cleaning' } : { kind: 'kept' };
}

const ENDED: Record<Exclude<PullRequest['state'], 'open'>, string> = { merged: 'merged', closed: 'closed without merging' };

/**
 * What the end of the pull request does to this workspace, in plain words: what the watcher did (outcome), or, before
 * its next pass, what it will do. `held`: the workspace's current hold reason (cleanupHeld), fresher than the event's.
 */
export function cleanupSentence(o: {
  state: Exclude<PullRequest['state'], 'open'>;
  branch: string;
  cleanup: PullRequestResponse['cleanup'];
  outcome: CleanupOutcome | null;
}): string {
  const ended = `The pull request was ${ENDED[o.state]}.`;
  const whose = o.cleanup.setBy === 'workspace' ? "this workspace's setting" : "the project's setting";
  switch (o.outcome?.kind) {
    case 'cleaned':
      return `${ended} Grove cleaned up: the sandbox and the checkout were removed; the branch ${o.branch} is kept.`;
    case 'cleaning':
      return `${ended} Grove is cleaning up: the sandbox and the checkout go; the branch ${o.branch} is kept.`;
    case 'kept':
      return `${ended} The sandbox and the checkout were kept, as ${whose} says; the branch ${o.branch} is kept too.`;
    case 'held':
      return `${ended} Grove kept the sandbox and the checkout because cleaning up would lose work (${o.cleanup.held ?? o.outcome.reason}). It cleans up once that work is gone; the branch ${o.branch} is kept either way.`;
    default:
      return o.cleanup.keepCheckout
        ? `${ended} Grove keeps the sandbox and the checkout, as ${whose} says; the branch ${o.branch} is kept too.`
        : `${ended} At its next check of pull requests Grove removes the sandbox and the checkout and keeps the branch ${o.branch} (unless that would lose work not in the pull request: then it keeps them and says why).`;
  }
}

/**
 * A failed read of the pull request explained: the forge unreachable or refusing (nothing changed, Refresh tries
 * again), or no forge or token configured any more. Publish's own explanations speak of opening one.
 */
export function explainPullRequestError(e: ErrorLike, project: string): Explained {
  if (e.code === 'forge_failed') {
    const reason = typeof e.body.reason === 'string' ? e.body.reason : '';
    const fix =
      reason === 'auth'
        ? 'Check that GROVE_FORGE_TOKEN is valid and may read this repository.'
        : reason === 'not_found'
          ? `Check forge.owner and forge.repo in the config of project ${project}.`
          : 'Check that the forge is up and reachable from the Grove server.';
    return { title: 'The forge could not say how the pull request stands; nothing was changed.', fix: `${fix} Then Refresh.`, detail: e.message };
  }
  const base = explainGitError(e, project);
  return { ...base, fix: base.fix.replace(/ Then publish again\.$/, ' Then Refresh.') };
}
