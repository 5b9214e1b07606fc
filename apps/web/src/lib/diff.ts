// A turn's unified diff (GET /turns/:n/diff) split per file into lines the diff view colours.

export type DiffLineKind = 'add' | 'del' | 'ctx' | 'hunk' | 'note';

export interface DiffLine {
  kind: DiffLineKind;
  text: string;
}

export interface DiffFile {
  path: string;
  lines: DiffLine[];
  /** Git does not show the content (a binary file). */
  binary: boolean;
}

const OCTAL = /^[0-7]{3}/;

/** Git quotes a path with special characters as a C string ("a/tab\there"); octal escapes are UTF-8 bytes. */
export function unquotePath(s: string): string {
  if (!s.startsWith('"') || !s.endsWith('"') || s.length < 2) return s;
  const body = s.slice(1, -1);
  const bytes: number[] = [];
  const simple: Record<string, number> = { n: 10, t: 9, r: 13, b: 8, f: 12, v: 11, a: 7, '"': 34, '\\': 92 };
  for (let i = 0; i < body.length; i++) {
    const c = body.charAt(i);
    if (c !== '\\') {
      bytes.push(...new TextEncoder().encode(c));
      continue;
    }
    const rest = body.slice(i + 1);
    const oct = OCTAL.exec(rest);
    if (oct) {
      bytes.push(parseInt(oct[0], 8));
      i += 3;
      continue;
    }
    const e = simple[rest.charAt(0)];
    bytes.push(e ?? 92);
    if (e !== undefined) i += 1;
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}

/** "a/x b/x" (no renames: both sides name the same file), possibly quoted. */
function pathFromHeader(rest: string): string {
  if (rest.startsWith('"')) {
    const end = rest.indexOf('" ');
    return unquotePath(rest.slice(0, end + 1)).replace(/^a\//, '');
  }
  const len = (rest.length - 5) / 2;
  return Number.isInteger(len) && len > 0 ? rest.slice(2, 2 + len) : rest.replace(/^a\//, '').split(' b/')[0] ?? rest;
}

/** The side of a ---/+++ line that names the file, or null for /dev/null. */
function pathFromSide(rest: string, prefix: 'a/' | 'b/'): string | null {
  if (rest === '/dev/null') return null;
  const p = unquotePath(rest.replace(/\t$/, ''));
  return p.startsWith(prefix) ? p.slice(2) : p;
}

export function parseUnifiedDiff(text: string): DiffFile[] {
  const files: DiffFile[] = [];
  let file: DiffFile | null = null;
  let inHunk = false;
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  for (const line of lines) {
    if (line.startsWith('diff --git ')) {
      file = { path: pathFromHeader(line.slice('diff --git '.length)), lines: [], binary: false };
      files.push(file);
      inHunk = false;
      continue;
    }
    if (!file) continue;
    if (!inHunk) {
      // The header between "diff --git" and the first hunk: modes, index, the two sides.
      if (line.startsWith('--- ')) {
        file.path = pathFromSide(line.slice(4), 'a/') ?? file.path;
        continue;
      }
      if (line.startsWith('+++ ')) {
        file.path = pathFromSide(line.slice(4), 'b/') ?? file.path;
        continue;
      }
      if (line.startsWith('Binary files ')) {
        file.binary = true;
        continue;
      }
      if (!line.startsWith('@@')) continue;
    }
    if (line.startsWith('@@')) {
      inHunk = true;
      file.lines.push({ kind: 'hunk', text: line });
    } else if (line.startsWith('+')) file.lines.push({ kind: 'add', text: line });
    else if (line.startsWith('-')) file.lines.push({ kind: 'del', text: line });
    else if (line.startsWith('\\')) file.lines.push({ kind: 'note', text: line });
    else file.lines.push({ kind: 'ctx', text: line });
  }
  return files;
}
