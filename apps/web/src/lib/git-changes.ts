// Pure helpers of the engineer's Changes panel: what its summary says, which events make it read the diff
// again, and every publish/checkpoint error turned into what happened and how to fix it.
import type { DiffResponse, GroveEvent, PullRequest } from '@grove/contracts';

/** Events of a workspace after which its diff may differ (a turn wrote files, a checkpoint, a publish, ...). */
const REFRESHING = new Set([
  'turn.snapshot',
  'turn.reverted',
  'workspace.undo',
  'workspace.checkpoint',
  'workspace.pushed',
  'workspace.published',
  'publish.failed',
  'workspace.pr_state',
  'workspace.cleaned',
  'workspace.saved',
  'workspace.started',
  'workspace.stopped',
]);

export function refreshesChanges(e: GroveEvent, slug: string): boolean {
  return e.slug === slug && REFRESHING.has(e.type);
}

const count = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** "3 files changed, +12 −4", or that nothing changed since the fork point. */
export function changesSummary(d: Pick<DiffResponse, 'files'>): string {
  if (d.files.length === 0) return 'No changes';
  const add = d.files.reduce((n, f) => n + (f.additions ?? 0), 0);
  const del = d.files.reduce((n, f) => n + (f.deletions ?? 0), 0);
  return `${count(d.files.length, 'file', 'files')} changed, +${add} −${del}`;
}

/** "2 commits ahead of main, 1 behind". */
export function aheadBehind(d: Pick<DiffResponse, 'ahead' | 'behind' | 'defaultBranch'>): string {
  return `${count(d.ahead, 'commit', 'commits')} ahead of ${d.defaultBranch}, ${d.behind} behind`;
}

export const FILE_STATUS: Record<DiffResponse['files'][number]['status'], string> = { A: 'added', M: 'changed', D: 'deleted', T: 'changed', R: 'renamed' };

export const PR_STATE_LABEL: Record<PullRequest['state'], string> = { open: 'open', merged: 'merged', closed: 'closed' };

export interface Explained {
  /** What went wrong, in one line. */
  title: string;
  /** How to fix it (may be empty when the server's message is all there is). */
  fix: string;
  /** The server's own message, with the details. */
  detail: string;
}

/** The shape of an API error this module needs (lib/api.ts's ApiError has it). */
export interface ErrorLike {
  code: string;
  message: string;
  body: Record<string, unknown>;
}

/** A publish or checkpoint error explained: not configured (what is missing), push rejected, remote or forge failed. */
export function explainGitError(e: ErrorLike, project: string): Explained {
  const reason = typeof e.body.reason === 'string' ? e.body.reason : '';
  const detail = e.message;
  switch (e.code) {
    case 'not_configured': {
      const missing = e.body.missing;
      if (missing === 'forge')
        return {
          title: 'This project has no forge to open pull requests on.',
          fix: `Add one to the project config: PUT /api/projects/${project}/config with forge {kind: "gitea" or "github", baseUrl, owner, repo}. Then publish again.`,
          detail,
        };
      if (missing === 'token')
        return { title: 'The server has no forge token.', fix: 'Set GROVE_FORGE_TOKEN in the environment of the Grove server and restart it. Then publish again.', detail };
      if (missing === 'remote')
        return {
          title: 'This project has no remote to push to.',
          fix: `It was not added from a repository URL. Add it from its repository (grove project add <name> <url>) and work there.`,
          detail,
        };
      return { title: 'Something publishing needs is not configured.', fix: '', detail };
    }
    case 'push_rejected':
      if (reason === 'non_fast_forward')
        return {
          title: 'Someone else pushed to this branch in the meantime; nothing was overwritten.',
          fix: 'Bring their commits into this workspace (fetch and merge them in the sandbox), then publish again.',
          detail,
        };
      return { title: 'The remote refused the push (a protected branch or a server hook).', fix: 'Check the rules of the remote repository for this branch, then publish again.', detail };
    case 'remote_failed':
      if (reason === 'auth')
        return { title: 'The remote refused the credentials.', fix: "Check the server user's ssh key, or that GROVE_FORGE_TOKEN may push to this repository.", detail };
      return { title: 'The remote could not be reached.', fix: "Check the network and the project's remote address, then publish again.", detail };
    case 'forge_failed': {
      const fix =
        reason === 'auth'
          ? 'Check that GROVE_FORGE_TOKEN is valid and may open pull requests on this repository.'
          : reason === 'not_found'
            ? `Check forge.owner and forge.repo in the config of project ${project}.`
            : reason === 'conflict'
              ? 'A pull request for this branch may already be open on the forge.'
              : 'Check that the forge is up and reachable from the Grove server.';
      return { title: 'The pull request could not be opened; nothing was left half-published.', fix: `${fix} Then publish again.`, detail };
    }
    case 'invalid_state':
      return { title: 'Not possible right now.', fix: '', detail };
    case 'workspace_stopped':
      return { title: 'The workspace is stopped.', fix: 'Reopen it, then try again.', detail };
    default:
      return { title: 'It did not work.', fix: '', detail };
  }
}
