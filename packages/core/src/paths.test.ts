import { isAbsolute, relative, sep } from 'node:path';
import { isGroveError } from '@grove/contracts';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createPaths, under, validName, validSlug } from './paths.ts';

const home = '/srv/grove-home';
const paths = createPaths(home);

function isUnder(root: string, p: string): boolean {
  const rel = relative(root, p);
  return rel !== '' && !rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel);
}

/** Either a 422 invalid_name naming the rule, or a path strictly under root. */
function checkBuilt(root: string, build: () => string): void {
  let p: string;
  try {
    p = build();
  } catch (e) {
    expect(isGroveError(e)).toBe(true);
    if (!isGroveError(e)) return;
    expect(e.code).toBe('invalid_name');
    expect(e.status).toBe(422);
    expect(e.message).toMatch(/name|slug|path/);
    return;
  }
  expect(isUnder(root, p)).toBe(true);
  expect(isUnder(home, p)).toBe(true);
}

describe('paths', () => {
  it('lays out the state root', () => {
    expect(paths.db).toBe(`${home}/grove.db`);
    expect(paths.repo('demo')).toBe(`${home}/repos/demo`);
    expect(paths.worktree('demo', 'fix-1')).toBe(`${home}/worktrees/demo/fix-1`);
    expect(paths.worktree('demo', 'default')).toBe(`${home}/worktrees/demo/default`);
    expect(paths.thread('demo~fix-1')).toBe(`${home}/threads/demo~fix-1`);
    expect(paths.run('demo')).toBe(`${home}/run/demo`);
    expect(paths.socket('demo~a')).toBe(`${home}/run/demo~a/backend.sock`);
    expect(paths.state('demo~a')).toBe(`${home}/state/demo~a`);
    expect(paths.lockFile('demo')).toBe(`${home}/locks/demo.lock`);
    expect(paths.archiveFor('demo~a', new Date('2025-01-02T03:04:05.678Z'))).toBe(`${home}/archive/demo~a-20250102T030405678Z`);
  });

  it.each([
    ['../x', /only a-z|start with/],
    ['a/b', /only a-z/],
    ['Demo', /lowercase/],
    ['a'.repeat(40), /at most 39/],
    ['', /empty/],
    ['demа', /ASCII/], // Cyrillic а
    ['a~b', /only a-z/],
    ['.', /start with/],
    ['..', /start with/],
    ['-a', /start with/],
    ['a b', /only a-z/],
    ['a\u0000', /only a-z/],
  ])('rejects %j with the rule it broke', (bad, rule) => {
    for (const build of [() => paths.repo(bad), () => paths.worktree('ok', bad), () => paths.worktree(bad, 'ok'), () => paths.lockFile(bad)]) {
      let err: unknown;
      try {
        build();
      } catch (e) {
        err = e;
      }
      expect(isGroveError(err)).toBe(true);
      if (!isGroveError(err)) continue;
      expect(err.code).toBe('invalid_name');
      expect(err.status).toBe(422);
      expect(err.message).toMatch(rule);
    }
  });

  it('rejects slugs that are not <project> or <project>~<name>', () => {
    for (const bad of ['a~b~c', '~a', 'a~', 'A~b', 'a/../b', '../a', 'a~../b', 'a~b/c']) {
      expect(() => validSlug(bad)).toThrow(expect.objectContaining({ code: 'invalid_name' }) as Error);
      expect(() => paths.thread(bad)).toThrow(expect.objectContaining({ code: 'invalid_name' }) as Error);
    }
    expect(validSlug('a~default')).toBe('a~default');
    expect(validName('default')).toBe('default');
  });

  it('under() refuses escapes even for raw segments', () => {
    expect(() => under('/r', '..', 'x')).toThrow(/escapes/);
    expect(() => under('/r', '/etc')).toThrow(/escapes/);
    expect(() => under('/r', '.')).toThrow(/escapes/);
    expect(under('/r', 'a', 'b')).toBe('/r/a/b');
  });

  // Strings biased toward the dangerous alphabet: dots, slashes, tildes, case, look-alikes, NUL.
  const nasty = fc.oneof(
    fc.string(),
    fc.string({ unit: fc.constantFrom('.', '/', '\\', '~', '-', 'a', 'Z', '0', 'а', 'ο', ' ', '\u0000', '%', '$') }),
    fc.string({ unit: fc.constantFrom('a', 'b', '-', '0'), maxLength: 45 }),
    fc.constantFrom('..', '.', '../x', 'a/../../b', '~', '~root', 'a~b'),
  );

  it('property: every name either fails validation with invalid_name or yields a path under its root', () => {
    fc.assert(
      fc.property(nasty, nasty, (a, b) => {
        checkBuilt(paths.reposRoot, () => paths.repo(a));
        checkBuilt(paths.worktreesRoot, () => paths.worktree(a, b));
        checkBuilt(paths.threadsRoot, () => paths.thread(`${a}~${b}`));
        checkBuilt(paths.threadsRoot, () => paths.thread(a));
        checkBuilt(paths.runRoot, () => paths.socket(`${a}~${b}`));
        checkBuilt(paths.stateRoot, () => paths.state(a));
        checkBuilt(paths.locksRoot, () => paths.lockFile(a));
        checkBuilt(paths.archiveRoot, () => paths.archiveFor(a, new Date()));
      }),
      { numRuns: 1000 },
    );
  });

  it('property: accepted names are exactly the documented pattern', () => {
    fc.assert(
      fc.property(nasty, (a) => {
        let ok = true;
        try {
          paths.repo(a);
        } catch {
          ok = false;
        }
        expect(ok).toBe(/^[a-z0-9][a-z0-9-]{0,38}$/.test(a));
      }),
      { numRuns: 3000 },
    );
  });
});
