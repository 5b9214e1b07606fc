// The config-parity overlay: files taken from a local checkout, handed to workspaces (read-only mounts, writable
// copies), and never in a commit. Real git, real SQLite, the in-memory sandbox driver (the mounts themselves are
// exercised against Docker in packages/sandbox/src/docker.test.ts).
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { projectConfigSchema, recoveryRefPrefix } from '@grove/contracts';
import { createTestGrove } from './test-support/test-grove.ts';
import type { Grove } from './index.ts';
import { pushBranch } from './remote.ts';
import { recordSnapshot, turnRef } from './turn-snapshots.ts';
import { FakeDriver } from './test-support/fake-driver.ts';
import { git, gitInWorktree, makeSourceRepo } from './test-support/repo.ts';

const SECRET = 'OVERLAY_SECRET_7c1e';

let tmp: string;
let home: string;
let src: string;
let driver: FakeDriver;
let grove: Grove | null;

beforeEach(() => {
  tmp = mkdtempSync(join(tmpdir(), 'grove-overlay-'));
  home = join(tmp, 'home');
  src = makeSourceRepo(join(tmp, 'src'));
  // Tracked in the repository: a shared .mcp.json and a team .claude/settings.json.
  mkdirSync(join(src, '.claude'));
  writeFileSync(join(src, '.mcp.json'), '{"mcpServers":{}}\n');
  writeFileSync(join(src, '.claude', 'settings.json'), '{"team":true}\n');
  git(src, 'add', '.');
  git(src, 'commit', '-q', '-m', 'shared config');
  // The user's local files: a modified .mcp.json, untracked .env and .claude/settings.local.json, a symlinked .envrc.
  writeFileSync(join(src, '.mcp.json'), `{"mcpServers":{"local":"${SECRET}-mcp"}}\n`);
  writeFileSync(join(src, '.env'), `TOKEN=${SECRET}-env\n`);
  writeFileSync(join(src, '.claude', 'settings.local.json'), `{"key":"${SECRET}-claude"}\n`);
  symlinkSync('/etc/hostname', join(src, '.envrc'));
  driver = new FakeDriver();
  grove = null;
});
afterEach(async () => {
  await grove?.close();
  await driver.closeAll();
  rmSync(tmp, { recursive: true, force: true });
});

async function open(): Promise<Grove> {
  grove = await createTestGrove({ home, driver, image: 'grove-sandbox:test', maxRunning: 4, logger: pino({ level: 'silent' }), healthTimeoutMs: 1_500, gitLockTimeoutMs: 5_000 });
  return grove;
}

const repo = () => join(home, 'repos', 'demo');
const wt = (name: string) => join(home, 'worktrees', 'demo', name);
const store = (slug: string) => join(home, 'objects', `${slug}.git`);
/** Workspace refs (turns, saved work) live in the workspace's store, branches in the primary. */
const dirOf = (ref: string) => (ref.startsWith('refs/grove/') ? store('demo~w') : repo());
const treeOf = (ref: string) => git(dirOf(ref), 'ls-tree', '-r', '--name-only', ref).split('\n');
const contentAt = (ref: string, path: string) => git(dirOf(ref), 'show', `${ref}:${path}`);
/** Files of ref holding SECRET (git grep exits 1 when none does). */
function secretsIn(dir: string, ref: string): string {
  try {
    return git(dir, 'grep', '-l', SECRET, ref, '--');
  } catch {
    return '';
  }
}

describe('overlay config', () => {
  it('refuses git plumbing, escapes and writable entries that are not overlay files', () => {
    for (const files of [['.git/config'], ['sub/.git'], ['../x'], ['/etc/passwd'], ['.gitattributes'], ['.gitignore'], ['.gitmodules'], ['a/*/b'], ['a//b'], ['./x'], ['[ab]']]) {
      expect(projectConfigSchema.safeParse({ overlay: { files } }).success, JSON.stringify(files)).toBe(false);
    }
    expect(projectConfigSchema.safeParse({ overlay: { files: ['.env'], writable: ['.envrc'] } }).success).toBe(false);
    expect(projectConfigSchema.safeParse({ overlay: { writable: ['.env'] } }).success).toBe(true);
    expect(projectConfigSchema.safeParse({ overlay: { files: ['config/*.local.yml', '.tool-versions'] } }).success).toBe(true);
  });
});

describe('overlay files', () => {
  it('are taken from the checkout, mounted read-only or copied, and never enter a commit, a recovery ref, a turn snapshot or a push', async () => {
    const g = await open();
    await g.addProject({ name: 'demo', source: src, createDefault: false, config: { overlay: { writable: ['.env'] } } });

    // Taken: what git does not carry as it is. Left: the tracked, unmodified team file and the symlink.
    const dir = join(home, 'overlays', 'demo');
    expect(readFileSync(join(dir, '.mcp.json'), 'utf8')).toContain(`${SECRET}-mcp`);
    expect(readFileSync(join(dir, '.env'), 'utf8')).toContain(`${SECRET}-env`);
    expect(readFileSync(join(dir, '.claude', 'settings.local.json'), 'utf8')).toContain(`${SECRET}-claude`);
    expect(existsSync(join(dir, '.claude', 'settings.json'))).toBe(false);
    expect(existsSync(join(dir, '.envrc'))).toBe(false);

    await g.fork({ project: 'demo', name: 'w' });
    // Read-only ones are mounts in the sandbox spec; the writable one is a copy in the worktree.
    const spec = driver.containers.get('demo~w')?.spec;
    expect(spec?.overlay).toEqual([
      { hostPath: join(dir, '.claude', 'settings.local.json'), path: '.claude/settings.local.json' },
      { hostPath: join(dir, '.mcp.json'), path: '.mcp.json' },
    ]);
    expect(readFileSync(join(wt('w'), '.env'), 'utf8')).toContain(`${SECRET}-env`);
    // The mount point Grove made (Docker would have made it as root) is an empty file, a regular one.
    expect(statSync(join(wt('w'), '.claude', 'settings.local.json')).size).toBe(0);
    // git status in the workspace does not offer the untracked overlay files.
    expect(gitInWorktree(wt('w'), 'status', '--porcelain', '--untracked-files=all')).not.toMatch(/\.env|settings\.local/);

    // The agent works; the worktree also shows the overlay content (as the mounts do in the sandbox).
    writeFileSync(join(wt('w'), 'app.txt'), 'v2\n');
    writeFileSync(join(wt('w'), '.env'), `TOKEN=${SECRET}-edited\n`);
    writeFileSync(join(wt('w'), '.mcp.json'), readFileSync(join(dir, '.mcp.json')));
    writeFileSync(join(wt('w'), '.claude', 'settings.local.json'), readFileSync(join(dir, '.claude', 'settings.local.json')));

    const turn = await recordSnapshot({ repo: repo(), objects: store('demo~w'), worktree: wt('w'), slug: 'demo~w', branch: 'grove/w' }, { n: 1, turn: 't1' });
    expect(turn?.files).toEqual(['app.txt']);

    const cp = await g.checkpoint('demo~w', { message: 'work' });
    expect(cp.files).toEqual(['app.txt']);
    const diff = await g.diff('demo~w');
    expect(diff.files.map((f) => f.path)).toEqual(['app.txt']);
    expect(diff.patch).not.toContain(SECRET);

    writeFileSync(join(wt('w'), 'late.txt'), 'late\n');
    await g.teardown('demo~w');
    const recovery = git(store('demo~w'), 'for-each-ref', '--format=%(refname)', recoveryRefPrefix('demo~w'));
    expect(recovery).not.toBe('');

    for (const ref of [turnRef('demo~w', 1), 'refs/heads/grove/w', recovery]) {
      const files = treeOf(ref);
      expect(files, ref).not.toContain('.env');
      expect(files, ref).not.toContain('.claude/settings.local.json');
      // The tracked ones are as the repository has them, never the overlay's version.
      expect(contentAt(ref, '.mcp.json'), ref).toBe('{"mcpServers":{}}');
      expect(contentAt(ref, '.claude/settings.json'), ref).toBe('{"team":true}');
      expect(secretsIn(dirOf(ref), ref), ref).toBe('');
    }
    expect(treeOf(recovery)).toContain('late.txt');

    // What a push sends is the branch: pushed to the checkout it came from, it holds no overlay content.
    await pushBranch(repo(), 'grove/w');
    expect(git(src, 'rev-parse', 'refs/heads/grove/w')).toBe(cp.commit);
    expect(secretsIn(src, 'refs/heads/grove/w')).toBe('');
  });

  it('are set and removed through the API for a project from a URL; a removed one stays out of commits', async () => {
    const g = await open();
    await g.addProject({ name: 'demo', source: `file://${src}`, createDefault: false });
    // Nothing is taken from a URL source.
    expect(await g.overlayFiles('demo')).toEqual({ files: [] });
    expect(await g.putOverlayFile('demo', { path: '.env', content: `TOKEN=${SECRET}\n` })).toEqual({ files: [{ path: '.env', writable: false, size: `TOKEN=${SECRET}\n`.length }] });
    await expect(g.putOverlayFile('demo', { path: 'config/app.yml', content: 'x' })).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringContaining('overlay.files') as string });
    await expect(g.putOverlayFile('demo', { path: '.git/config', content: 'x' })).rejects.toMatchObject({ code: 'invalid_input' });
    await expect(g.putOverlayFile('nope', { path: '.env', content: 'x' })).rejects.toMatchObject({ code: 'project_not_found' });

    await g.fork({ project: 'demo', name: 'w' });
    expect(driver.containers.get('demo~w')?.spec.overlay).toEqual([{ hostPath: join(home, 'overlays', 'demo', '.env'), path: '.env' }]);

    expect(await g.deleteOverlayFile('demo', '.env')).toEqual({ files: [] });
    // The workspace still has its mount point (and might hold a copy): .env stays out of its commits.
    writeFileSync(join(wt('w'), '.env'), `TOKEN=${SECRET}\n`);
    writeFileSync(join(wt('w'), 'app.txt'), 'v3\n');
    expect((await g.checkpoint('demo~w')).files).toEqual(['app.txt']);
    expect(treeOf('refs/heads/grove/w')).not.toContain('.env');
  });

  it('are never written through a symlink the branch puts in their way', async () => {
    const outside = join(tmp, 'outside');
    mkdirSync(outside);
    symlinkSync(outside, join(src, 'conf'));
    git(src, 'add', 'conf');
    git(src, 'commit', '-q', '-m', 'a link out of the worktree');
    const g = await open();
    await g.addProject({ name: 'demo', source: `file://${src}`, createDefault: false, config: { overlay: { files: ['conf/app.env', 'conf/rw.env'], writable: ['conf/rw.env'] } } });
    await g.putOverlayFile('demo', { path: 'conf/app.env', content: 'A=1\n' });
    await g.putOverlayFile('demo', { path: 'conf/rw.env', content: 'B=2\n' });
    await g.fork({ project: 'demo', name: 'w' });
    expect(driver.containers.get('demo~w')?.spec.overlay).toEqual([]);
    expect(readdirSync(outside)).toEqual([]);
  });
});

