// One changed file's diff lines (from lib/diff.ts) and its +/- counts, shared by the Changes panel and the Review view.
import type { DiffResponse } from '@grove/contracts';
import type { DiffFile } from '../lib/diff.ts';
import { FILE_STATUS } from '../lib/git-changes.ts';
import './diff.css';

type ChangedFile = DiffResponse['files'][number];

/** "+3 −1", or "not text" for a binary file (git counts no lines there). */
export function FileCounts({ file: f }: { file: ChangedFile }) {
  if (f.additions === null || f.deletions === null) return <span className="file-counts">not text</span>;
  return (
    <span className="file-counts" aria-label={`${f.additions} lines added, ${f.deletions} removed`}>
      <span className="count-add">+{f.additions}</span> <span className="count-del">−{f.deletions}</span>
    </span>
  );
}

/** "added  src/a.ts  +3 −1": the file's status, its path (with the old one for a rename) and its counts. */
export function FileLabel({ file: f }: { file: ChangedFile }) {
  return (
    <>
      <span className={`file-status file-${FILE_STATUS[f.status]}`}>{FILE_STATUS[f.status]}</span>
      <span className="file-path">{f.from ? `${f.from} → ${f.path}` : f.path}</span>
      <FileCounts file={f} />
    </>
  );
}

/** `file` undefined: the patch has nothing for it (cut off by the size cap, or a change git shows no lines for). */
export function FileDiff({ id, path, file, truncated }: { id?: string; path: string; file: DiffFile | undefined; truncated: boolean }) {
  if (!file) {
    return (
      <p id={id} className="diff-status">
        {truncated ? 'This file is beyond the part of the changes shown.' : 'Nothing to show for this file.'}
      </p>
    );
  }
  return (
    <div id={id} className="diff" role="region" aria-label={`Changes in ${path}`}>
      {file.binary ? (
        <p className="diff-status">This file is not text; its content is not shown.</p>
      ) : (
        <pre className="diff-lines">
          {file.lines.map((l, i) => (
            <span key={i} className={`diff-line diff-${l.kind}`}>
              {l.text}
              {'\n'}
            </span>
          ))}
        </pre>
      )}
    </div>
  );
}
