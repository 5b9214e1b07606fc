// The diff view's parser on git's own output shapes: added, deleted, modified, binary, quoted paths, no newline at end.
import { describe, expect, it } from 'vitest';
import { parseUnifiedDiff, unquotePath } from './diff.ts';

const DIFF = [
  'diff --git a/notes.txt b/notes.txt',
  'index 1111111..2222222 100644',
  '--- a/notes.txt',
  '+++ b/notes.txt',
  '@@ -1,2 +1,2 @@',
  ' keep',
  '-old line',
  '+new line',
  'diff --git a/gone.txt b/gone.txt',
  'deleted file mode 100644',
  'index 3333333..0000000',
  '--- a/gone.txt',
  '+++ /dev/null',
  '@@ -1 +0,0 @@',
  '-bye',
  '\\ No newline at end of file',
  'diff --git a/img.png b/img.png',
  'new file mode 100644',
  'index 0000000..4444444',
  'Binary files /dev/null and b/img.png differ',
  'diff --git "a/caf\\303\\251 \\"x\\".txt" "b/caf\\303\\251 \\"x\\".txt"',
  'new file mode 100644',
  '--- /dev/null',
  '+++ "b/caf\\303\\251 \\"x\\".txt"',
  '@@ -0,0 +1 @@',
  '+--- not a header inside a hunk',
  '',
].join('\n');

describe('parseUnifiedDiff', () => {
  const files = parseUnifiedDiff(DIFF);

  it('splits per file with the file path from the header or the side that exists', () => {
    expect(files.map((f) => f.path)).toEqual(['notes.txt', 'gone.txt', 'img.png', 'café "x".txt']);
    expect(files.map((f) => f.binary)).toEqual([false, false, true, false]);
  });

  it('classifies hunk, context, added, removed and note lines, and keeps header lines out', () => {
    expect(files[0]?.lines).toEqual([
      { kind: 'hunk', text: '@@ -1,2 +1,2 @@' },
      { kind: 'ctx', text: ' keep' },
      { kind: 'del', text: '-old line' },
      { kind: 'add', text: '+new line' },
    ]);
    expect(files[1]?.lines.map((l) => l.kind)).toEqual(['hunk', 'del', 'note']);
    expect(files[3]?.lines.at(-1)).toEqual({ kind: 'add', text: '+--- not a header inside a hunk' });
  });

  it('reads nothing out of an empty diff or stray text', () => {
    expect(parseUnifiedDiff('')).toEqual([]);
    expect(parseUnifiedDiff('warning: something\n')).toEqual([]);
  });
});

describe('unquotePath', () => {
  it('decodes C escapes and octal UTF-8 bytes, and leaves plain paths alone', () => {
    expect(unquotePath('"a\\tb\\\\c"')).toBe('a\tb\\c');
    expect(unquotePath('"\\346\\227\\245.md"')).toBe('日.md');
    expect(unquotePath('plain/path.txt')).toBe('plain/path.txt');
  });
});
