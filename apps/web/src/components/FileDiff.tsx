// One changed file's status, +/- counts and diff lines (from lib/diff.ts): the whole file row for the Changes panel and
// the Review view (FileLabel, FileDiff), and the parts a reply's changes in the thread (TurnChanges) shows the same way.
import type { DiffResponse } from '@grove/contracts';
import type { DiffFile } from '../lib/diff.ts';
import { FILE_STATUS } from '../lib/git-changes.ts';
import './diff.css';

type ChangedFile = DiffResponse['files'][number];

const lines = (n: number) => `${n} ${n === 1 ? 'line' : 'lines'}`;

/** "+3 −1", or "not text" for a binary file (git counts no lines there: null). */
export function LineCounts({ added, removed }: { added: number | null; removed: number | null }) {
  if (added === null || removed === null) return <span className="file-counts">not text</span>;
  return (
    <span className="file-counts" aria-label={`${lines(added)} added, ${removed} removed`}>
      <span className="count-add">+{added}</span> <span className="count-del">−{removed}</span>
    </span>
  );
}

/** What happened to the file in words ("added", "changed"…); the word is also its class, which the colours key on. */
export function FileStatus({ label }: { label: string }) {
  return <span className={`file-status file-${label}`}>{label}</span>;
}

/** The diff's lines, coloured by kind, or why there are none for a file git shows no content of. */
export function DiffLines({ file }: { file: DiffFile }) {
  if (file.binary) return <p className="diff-status">This file is not text; its content is not shown.</p>;
  return (
    <pre className="diff-lines">
      {file.lines.map((l, i) => (
        <span key={i} className={`diff-line diff-${l.kind}`}>
          {l.text}
          {'\n'}
        </span>
      ))}
    </pre>
  );
}

/** "added  src/a.ts  +3 −1": the file's status, its path (with the old one for a rename) and its counts. */
export function FileLabel({ file: f }: { file: ChangedFile }) {
  return (
    <>
      <FileStatus label={FILE_STATUS[f.status]} />
      <span className="file-path">{f.from ? `${f.from} → ${f.path}` : f.path}</span>
      <LineCounts added={f.additions} removed={f.deletions} />
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
      <DiffLines file={file} />
    </div>
  );
}
