// A checkpoint, publish or forge error in the dialog's alert: what happened, how to fix it, the server's words.
import { isApiError, messageOf } from '../lib/api.ts';
import { explainGitError, type Explained } from '../lib/git-changes.ts';
import './GitErrorBox.css';

export function explainError(e: unknown, project: string): Explained {
  if (isApiError(e)) return explainGitError(e, project);
  return { title: 'It did not work.', fix: '', detail: messageOf(e) };
}

export function GitErrorBox({ error, className = 'dialog-alert' }: { error: Explained; className?: string }) {
  return (
    <div className={className} role="alert">
      <p className="git-error-title">{error.title}</p>
      {error.fix ? <p>{error.fix}</p> : null}
      <p className="git-error-detail">{error.detail}</p>
    </div>
  );
}
