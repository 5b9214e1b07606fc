// A workspace's pull request: its link and its state (open, merged, closed), on the card and in the Changes panel.
import type { PullRequest } from '@grove/contracts';
import { PR_STATE_LABEL } from '../lib/git-changes.ts';
import './PrLink.css';

export function PrLink({ pr }: { pr: PullRequest }) {
  return (
    <span className="pr">
      <a href={pr.url} target="_blank" rel="noopener noreferrer" aria-label={`Pull request #${pr.number} (${PR_STATE_LABEL[pr.state]})`}>
        PR #{pr.number} ↗
      </a>{' '}
      <span className={`pr-state pr-${pr.state}`}>{PR_STATE_LABEL[pr.state]}</span>
    </span>
  );
}
