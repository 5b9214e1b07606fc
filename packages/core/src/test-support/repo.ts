// Test helper: real git repositories in temp dirs.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { makeSlug } from '@grove/contracts';
import { basename, dirname, join } from 'node:path';

export function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=Grove Test', '-c', 'user.email=test@grove.invalid', '-c', 'safe.directory=*', ...args], {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  }).trim();
}

/**
 * git in a Grove worktree (<home>/worktrees/<project>/<name>) as the sandbox sees it: the worktree's own .git file
 * names the sandbox's git dir, a path that exists only inside the container, so this reads the host's admin dir
 * <home>/repos/<project>/worktrees/<name> for HEAD and refs, with the sandbox's index (<home>/sandbox-git/<slug>)
 * when there is one. Tests use it to stand in for the agent's own git.
 */
export function gitInWorktree(worktree: string, ...args: string[]): string {
  const name = basename(worktree);
  const project = basename(dirname(worktree));
  const home = dirname(dirname(dirname(worktree)));
  const index = join(home, 'sandbox-git', makeSlug(project, name), 'index');
  return execFileSync('git', ['-c', 'user.name=Grove Test', '-c', 'user.email=test@grove.invalid', '-c', 'safe.directory=*', '--git-dir', join(home, 'repos', project, 'worktrees', name), '--work-tree', worktree, ...args], {
    cwd: worktree,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    // A test helper passing the test's own environment through; not configuration.
    // eslint-disable-next-line no-restricted-properties
    env: existsSync(index) ? { ...process.env, GIT_INDEX_FILE: index } : process.env,
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
