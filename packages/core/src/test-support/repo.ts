// Test helper: real git repositories in temp dirs.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=Grove Test', '-c', 'user.email=test@grove.invalid', '-c', 'safe.directory=*', ...args], {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  }).trim();
}

/** A source repository with two commits on `main` and a `feature` branch one commit ahead. */
export function makeSourceRepo(dir: string): string {
  mkdirSync(dir, { recursive: true });
  git(dir, 'init', '-q', '-b', 'main');
  writeFileSync(join(dir, 'README.md'), '# demo\n');
  git(dir, 'add', '.');
  git(dir, 'commit', '-q', '-m', 'first');
  writeFileSync(join(dir, 'app.txt'), 'v1\n');
  git(dir, 'add', '.');
  git(dir, 'commit', '-q', '-m', 'second');
  git(dir, 'checkout', '-q', '-b', 'feature');
  writeFileSync(join(dir, 'feature.txt'), 'f\n');
  git(dir, 'add', '.');
  git(dir, 'commit', '-q', '-m', 'feature');
  git(dir, 'checkout', '-q', 'main');
  return dir;
}

export function branches(repo: string): string[] {
  const out = git(repo, 'for-each-ref', '--format=%(refname:short)', 'refs/heads/');
  return out ? out.split('\n') : [];
}
