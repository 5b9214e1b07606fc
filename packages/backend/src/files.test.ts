// The Files view's reads: path checks, porcelain parsing and marks (pure), and the listing/reading rules on a real
// directory with a real git repository and the things an agent could plant (links out, a FIFO, a huge file, binary).
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FILE_CONTENT_CAP, fileContentQuerySchema, fileContentResponseSchema, filesTreeQuerySchema, filesTreeResponseSchema } from '@grove/contracts';
import type { FileEntry } from '@grove/contracts';
import { childMarks, deletedChildren, listDirectory, looksBinary, markOf, parseGitStatus, readFileContent } from './files.ts';
import { http, startBackend } from './test-support.ts';
import type { TestBackend } from './test-support.ts';

describe('files path schema', () => {
  it.each([
    ['../etc/passwd', /\.\./],
    ['src/../../x', /\.\./],
    ['/etc/shadow', /absolute/],
    ['a\0b', /NUL/],
    ['a\\..\\b', /separator/],
    ['x'.repeat(5000), /at most/],
  ])('refuses %j', (path, why) => {
    const r = fileContentQuerySchema.safeParse({ path });
    expect(r.success).toBe(false);
    expect(r.error?.issues.map((i) => i.message).join(' ')).toMatch(why);
  });

  it('takes relative paths; the tree defaults to the top, content needs a file', () => {
    expect(filesTreeQuerySchema.parse({})).toEqual({ path: '' });
    expect(fileContentQuerySchema.parse({ path: 'src/a.ts' })).toEqual({ path: 'src/a.ts' });
    expect(fileContentQuerySchema.safeParse({ path: '' }).success).toBe(false);
    expect(fileContentQuerySchema.safeParse({ path: './.' }).success).toBe(false);
    expect(filesTreeQuerySchema.safeParse({ path: 'a', other: '1' }).success).toBe(false);
  });
});

describe('git status marks', () => {
  it('maps porcelain XY codes to one mark', () => {
    expect(markOf(' M')).toBe('M');
    expect(markOf('M ')).toBe('M');
    expect(markOf('A ')).toBe('A');
    expect(markOf('AM')).toBe('A');
    expect(markOf(' D')).toBe('D');
    expect(markOf('R ')).toBe('R');
    expect(markOf('UU')).toBe('U');
    expect(markOf('??')).toBe('?');
    expect(markOf('!!')).toBeNull();
  });

  it('parses -z output, skipping a rename source, and rolls marks up to directories', () => {
    const out = [' M src/a.ts', 'R  new.ts', 'old.ts', '?? src/deep/x.txt', ' D gone.md', ' D lib/only.ts', ''].join('\0');
    const marks = parseGitStatus(out);
    expect([...marks]).toEqual([
      ['src/a.ts', 'M'],
      ['new.ts', 'R'],
      ['src/deep/x.txt', '?'],
      ['gone.md', 'D'],
      ['lib/only.ts', 'D'],
    ]);
    expect(Object.fromEntries(childMarks(marks, ''))).toEqual({ src: 'M', 'new.ts': 'R', 'gone.md': 'D', lib: 'D' });
    expect(Object.fromEntries(childMarks(marks, 'src'))).toEqual({ 'a.ts': 'M', deep: '?' });
    expect(deletedChildren(marks, '', new Set(['src', 'new.ts']))).toEqual([
      { name: 'gone.md', dir: false },
      { name: 'lib', dir: true },
    ]);
  });

  it('calls data with a NUL byte binary', () => {
    expect(looksBinary(Buffer.from('plain text\n'))).toBe(false);
    expect(looksBinary(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01]))).toBe(true);
  });
});

describe('listing and reading a workspace', () => {
  let root: string;
  let ws: string;
  let secret: string;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'gf-'));
    ws = join(root, 'ws');
    secret = join(root, 'secret.txt');
    await writeFile(secret, 'TOP-SECRET-VALUE\n');
    await mkdir(join(ws, 'src', 'deep'), { recursive: true });
    const g = (...args: string[]) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: ws, stdio: 'ignore' });
    g('init', '-q');
    await writeFile(join(ws, 'src', 'a.ts'), 'export const a = 1;\n');
    await writeFile(join(ws, 'gone.md'), 'bye\n');
    await writeFile(join(ws, 'README.md'), '# hi\n');
    g('add', '-A');
    g('commit', '-qm', 'init');
    await writeFile(join(ws, 'src', 'a.ts'), 'export const a = 2;\n');
    await rm(join(ws, 'gone.md'));
    await writeFile(join(ws, 'src', 'deep', 'new.txt'), 'new\n');
    await symlink(secret, join(ws, 'leak'));
    await symlink(root, join(ws, 'out'));
    execFileSync('mkfifo', [join(ws, 'pipe')]);
    await writeFile(join(ws, 'blob.bin'), Buffer.from([1, 2, 0, 3, 4]));
    await writeFile(join(ws, 'big.txt'), '');
    await truncate(join(ws, 'big.txt'), 3 * 1024 * 1024);
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  const byName = (entries: FileEntry[]) => Object.fromEntries(entries.map((e) => [e.name, e]));

  it('lists one directory: dirs first, .git hidden, links as links with their target, marks from git', async () => {
    const top = filesTreeResponseSchema.parse(await listDirectory({ workspaceDir: ws, path: '' }));
    expect(top.gitError).toBeUndefined();
    expect(top.entries[0]?.name).toBe('src');
    const e = byName(top.entries);
    expect(e['.git']).toBeUndefined();
    expect(e.src).toMatchObject({ kind: 'dir', mark: 'M', path: 'src' });
    expect(e.leak).toMatchObject({ kind: 'symlink', target: secret });
    expect(e.out).toMatchObject({ kind: 'symlink', target: root });
    expect(e.pipe).toMatchObject({ kind: 'other' });
    expect(e['gone.md']).toMatchObject({ kind: 'file', mark: 'D', deleted: true, size: null });
    expect(e['README.md']).toMatchObject({ kind: 'file', mark: null, size: 5 });
    const src = await listDirectory({ workspaceDir: ws, path: 'src' });
    expect(byName(src.entries)['a.ts']).toMatchObject({ mark: 'M', path: 'src/a.ts' });
    expect(byName(src.entries).deep).toMatchObject({ mark: '?' });
  });

  it('reads text, says binary, and cuts a large file at the cap with its size', async () => {
    expect(await readFileContent({ workspaceDir: ws, path: 'src/a.ts' })).toEqual({ path: 'src/a.ts', binary: false, size: 20, text: 'export const a = 2;\n', truncated: false });
    expect(await readFileContent({ workspaceDir: ws, path: 'blob.bin' })).toEqual({ path: 'blob.bin', binary: true, size: 5 });
    // A sparse 3 MiB file of zeros: binary, and only its size travels.
    expect(await readFileContent({ workspaceDir: ws, path: 'big.txt' })).toEqual({ path: 'big.txt', binary: true, size: 3 * 1024 * 1024 });
    await writeFile(join(ws, 'long.txt'), 'x'.repeat(FILE_CONTENT_CAP + 10));
    const long = fileContentResponseSchema.parse(await readFileContent({ workspaceDir: ws, path: 'long.txt' }));
    expect(long).toMatchObject({ binary: false, truncated: true, size: FILE_CONTENT_CAP + 10 });
    expect(long.binary === false && long.text.length).toBe(FILE_CONTENT_CAP);
  });

  it('never follows a link, never opens a FIFO, never shows .git', async () => {
    await expect(readFileContent({ workspaceDir: ws, path: 'leak' })).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringMatching(/symlink/) });
    await expect(readFileContent({ workspaceDir: ws, path: 'out/secret.txt' })).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringMatching(/out is a symlink/) });
    await expect(listDirectory({ workspaceDir: ws, path: 'out' })).rejects.toMatchObject({ code: 'invalid_input' });
    // Would block forever without O_NONBLOCK: no writer ever comes.
    await expect(readFileContent({ workspaceDir: ws, path: 'pipe' })).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringMatching(/not a regular file/) });
    await expect(readFileContent({ workspaceDir: ws, path: '.git/config' })).rejects.toMatchObject({ code: 'not_found' });
    await expect(listDirectory({ workspaceDir: ws, path: 'src/.git' })).rejects.toMatchObject({ code: 'not_found' });
    await expect(readFileContent({ workspaceDir: ws, path: 'nope.txt' })).rejects.toMatchObject({ code: 'not_found' });
    await expect(readFileContent({ workspaceDir: ws, path: 'src' })).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringMatching(/directory/) });
    await expect(listDirectory({ workspaceDir: ws, path: 'README.md' })).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringMatching(/not a directory/) });
  });

  it('lists without marks, and says why, where there is no git', async () => {
    const plain = join(root, 'plain');
    await mkdir(plain);
    await writeFile(join(plain, 'f.txt'), 'f');
    const r = await listDirectory({ workspaceDir: plain, path: '' });
    expect(r.entries.map((e) => [e.name, e.mark])).toEqual([['f.txt', null]]);
    expect(r.gitError).toMatch(/not a git repository/i);
  });
});

describe('GET /files/tree and /files/content', () => {
  let t: TestBackend;
  beforeAll(async () => {
    t = await startBackend({ provider: 'scripted' });
    await writeFile(join(t.workspaceDir, 'hello.txt'), 'hello\n');
  });
  afterAll(async () => {
    await t.dispose();
  });

  it('answers the schemas, and 422/404 with a message for bad or unknown paths', async () => {
    const tree = await http(t.socketPath, { path: '/files/tree' });
    expect(tree.status).toBe(200);
    expect(filesTreeResponseSchema.parse(tree.json).entries.map((e) => e.name)).toContain('hello.txt');
    const file = await http(t.socketPath, { path: '/files/content?path=hello.txt' });
    expect(fileContentResponseSchema.parse(file.json)).toMatchObject({ binary: false, text: 'hello\n' });
    for (const bad of ['..%2Fthread%2Fthread.jsonl', '%2Fetc%2Fshadow', 'a%00b']) {
      const r = await http(t.socketPath, { path: `/files/content?path=${bad}` });
      expect(r.status, bad).toBe(422);
      expect(r.json).toMatchObject({ code: 'invalid_input', message: expect.stringMatching(/path/) });
    }
    const missing = await http(t.socketPath, { path: '/files/content?path=missing.txt' });
    expect(missing.status).toBe(404);
    expect(missing.json).toMatchObject({ code: 'not_found', message: expect.stringMatching(/missing\.txt/) });
  });
});
