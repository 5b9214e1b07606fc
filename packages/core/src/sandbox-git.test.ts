import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WORKTREE_GITFILE, ensureSandboxGitDir } from './sandbox-git.ts';

let root: string;
let o: Parameters<typeof ensureSandboxGitDir>[0];

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'grove-sandbox-git-'));
  for (const d of ['worktree', 'admin', 'scratch']) mkdirSync(join(root, d));
  writeFileSync(join(root, 'admin', 'index'), 'DIRC-the-checkout-index');
  writeFileSync(join(root, 'worktree', '.git'), `gitdir: ${join(root, 'admin')}\n`);
  writeFileSync(join(root, 'secret'), 'host file');
  o = { dir: join(root, 'sgit'), worktree: join(root, 'worktree'), branch: 'grove/x', hostAdminDir: join(root, 'admin'), scratch: join(root, 'scratch'), owner: null, fresh: true };
});

afterEach(() => rmSync(root, { recursive: true, force: true }));

describe('ensureSandboxGitDir', () => {
  it("lays out the sandbox's own git dir and points the worktree's .git at it", async () => {
    expect(await ensureSandboxGitDir(o)).toEqual({ gitfileReplaced: true });
    expect(readFileSync(join(o.dir, 'HEAD'), 'utf8')).toBe('ref: refs/heads/grove/x\n');
    expect(readFileSync(join(o.dir, 'commondir'), 'utf8')).toBe('/grove/common\n');
    expect(readFileSync(join(o.dir, 'gitdir'), 'utf8')).toBe('/workspace/.git\n');
    expect(readFileSync(join(o.dir, 'index'), 'utf8')).toBe('DIRC-the-checkout-index');
    expect(readFileSync(join(o.worktree, '.git'), 'utf8')).toBe(WORKTREE_GITFILE);
  });

  it('replaces links the agent planted instead of writing through them, and keeps its HEAD and index on a restart', async () => {
    await ensureSandboxGitDir(o);
    writeFileSync(join(o.dir, 'HEAD'), 'ref: refs/heads/elsewhere\n');
    rmSync(join(o.dir, 'commondir'));
    symlinkSync(join(root, 'secret'), join(o.dir, 'commondir'));
    rmSync(join(o.worktree, '.git'));
    symlinkSync(join(root, 'secret'), join(o.worktree, '.git'));
    await ensureSandboxGitDir({ ...o, fresh: false });
    expect(readFileSync(join(root, 'secret'), 'utf8')).toBe('host file');
    expect(lstatSync(join(o.dir, 'commondir')).isFile()).toBe(true);
    expect(lstatSync(join(o.worktree, '.git')).isFile()).toBe(true);
    expect(readFileSync(join(o.dir, 'HEAD'), 'utf8')).toBe('ref: refs/heads/elsewhere\n');
  });

  it('leaves a .git directory (a repository of the agent\'s own) alone, and never blocks on a FIFO as the index it copies', async () => {
    rmSync(join(o.worktree, '.git'));
    mkdirSync(join(o.worktree, '.git'));
    rmSync(join(o.hostAdminDir, 'index'));
    execFileSync('mkfifo', [join(o.hostAdminDir, 'index')]);
    expect(await ensureSandboxGitDir(o)).toEqual({ gitfileReplaced: false });
    expect(lstatSync(join(o.worktree, '.git')).isDirectory()).toBe(true);
    // No index rather than an empty file: git reads a missing index as empty and refuses a 0-byte one.
    expect(existsSync(join(o.dir, 'index'))).toBe(false);
  });
});
