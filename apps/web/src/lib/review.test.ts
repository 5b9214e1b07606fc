// The Review view's words: checks counts, and what the end of a pull request does or did.
import { describe, expect, it } from 'vitest';
import type { GroveEvent, PullRequestChecks } from '@grove/contracts';
import { checksCounts, cleanupOutcome, cleanupSentence, explainPullRequestError, refreshesPullRequest } from './review.ts';

let id = 0;
const ev = (type: string, data: Record<string, unknown> = {}, at = '2026-02-01T00:00:00.000Z'): GroveEvent => ({ id: ++id, slug: 'app~feat', type, data, at });
const SINCE = '2026-01-15T00:00:00.000Z';
const checks = (o: Partial<PullRequestChecks>): PullRequestChecks => ({ state: 'none', total: 0, success: 0, failure: 0, pending: 0, checks: [], ...o });
const clean = { keepCheckout: false, setBy: 'project' as const, held: null };

describe('checks in words', () => {
  it('names the non-zero counts, failures first', () => {
    expect(checksCounts(checks({ state: 'failure', total: 3, failure: 1, success: 2 }))).toBe('1 failed, 2 passed');
    expect(checksCounts(checks({ state: 'pending', total: 1, pending: 1 }))).toBe('1 running');
    expect(checksCounts(checks({}))).toBe('none reported');
  });

  it('re-reads the pull request on its own workspace\'s publish and watcher events only', () => {
    expect(refreshesPullRequest(ev('workspace.pr_state'), 'app~feat')).toBe(true);
    expect(refreshesPullRequest(ev('workspace.cleaned'), 'app~feat')).toBe(true);
    expect(refreshesPullRequest(ev('workspace.pr_state'), 'app~other')).toBe(false);
    expect(refreshesPullRequest(ev('turn.snapshot'), 'app~feat')).toBe(false);
  });
});

describe('what the end of the pull request does', () => {
  it('reads the outcome from the trail: cleaned, cleaning, kept by the setting, held for work', () => {
    expect(cleanupOutcome([], SINCE)).toBeNull();
    expect(cleanupOutcome([ev('workspace.pr_state', { number: 1, from: 'open', to: 'merged', cleanup: true }), ev('workspace.cleaned')], SINCE)).toEqual({ kind: 'cleaned' });
    expect(cleanupOutcome([ev('workspace.pr_state', { number: 1, from: 'open', to: 'merged', cleanup: true })], SINCE)).toEqual({ kind: 'cleaning' });
    expect(cleanupOutcome([ev('workspace.pr_state', { number: 1, from: 'open', to: 'closed', cleanup: false })], SINCE)).toEqual({ kind: 'kept' });
    const held = ev('workspace.pr_state', { number: 1, from: 'open', to: 'merged', cleanup: false, held: '2 files changed since' });
    expect(cleanupOutcome([held], SINCE)).toEqual({ kind: 'held', reason: '2 files changed since' });
    // The hold ended: the watcher cleans up without another pr_state.
    expect(cleanupOutcome([held, ev('workspace.kept'), ev('workspace.cleaned')], SINCE)).toEqual({ kind: 'cleaned' });
    // A cleaned event before the end (an earlier teardown), an earlier workspace of the same name, a reopened PR: not this end.
    expect(cleanupOutcome([ev('workspace.cleaned'), ev('workspace.pr_state', { number: 1, from: 'open', to: 'merged', cleanup: true })], SINCE)).toEqual({ kind: 'cleaning' });
    expect(cleanupOutcome([ev('workspace.pr_state', { number: 1, from: 'open', to: 'merged', cleanup: true }, '2026-01-01T00:00:00.000Z'), ev('workspace.cleaned', {}, '2026-01-01T00:00:01.000Z')], SINCE)).toBeNull();
    expect(cleanupOutcome([ev('workspace.pr_state', { number: 1, from: 'open', to: 'closed', cleanup: false }), ev('workspace.pr_state', { number: 1, from: 'closed', to: 'open', cleanup: false })], SINCE)).toBeNull();
  });

  it('says it in plain words, before and after the watcher acted', () => {
    const s = (o: Partial<Parameters<typeof cleanupSentence>[0]>) => cleanupSentence({ state: 'merged', branch: 'grove/feat', cleanup: clean, outcome: null, ...o });
    expect(s({})).toBe(
      'The pull request was merged. At its next check of pull requests Grove removes the sandbox and the checkout and keeps the branch grove/feat (unless that would lose work not in the pull request: then it keeps them and says why).',
    );
    expect(s({ state: 'closed', cleanup: { keepCheckout: true, setBy: 'workspace', held: null } })).toBe(
      "The pull request was closed without merging. Grove keeps the sandbox and the checkout, as this workspace's setting says; the branch grove/feat is kept too.",
    );
    expect(s({ outcome: { kind: 'cleaned' } })).toBe('The pull request was merged. Grove cleaned up: the sandbox and the checkout were removed; the branch grove/feat is kept.');
    expect(s({ outcome: { kind: 'kept' } })).toMatch(/were kept, as the project's setting says/);
    expect(s({ outcome: { kind: 'held', reason: 'old' }, cleanup: { ...clean, held: '1 file changed since' } })).toMatch(/would lose work \(1 file changed since\)/);
  });
});

describe('a failed read of the pull request', () => {
  it('says the forge could not answer (not that opening failed), and how to fix a missing forge', () => {
    const down = explainPullRequestError({ code: 'forge_failed', message: 'reading pull request #1: the gitea API answered 503', body: { reason: 'error' } }, 'app');
    expect(down.title).toBe('The forge could not say how the pull request stands; nothing was changed.');
    expect(down.fix).toBe('Check that the forge is up and reachable from the Grove server. Then Refresh.');
    expect(explainPullRequestError({ code: 'forge_failed', message: 'm', body: { reason: 'auth' } }, 'app').fix).toMatch(/GROVE_FORGE_TOKEN/);
    const none = explainPullRequestError({ code: 'not_configured', message: 'm', body: { missing: 'forge' } }, 'app');
    expect(none.title).toBe('This project has no forge to open pull requests on.');
    expect(none.fix).toMatch(/PUT \/api\/projects\/app\/config .* Then Refresh\.$/);
  });
});
