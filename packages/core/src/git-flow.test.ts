// Projects from real repositories, fetch before fork, checkpoints, diff and publish: real git (a bare repository
// over file:// as the remote), real SQLite, a test forge on 127.0.0.1 and the in-memory sandbox driver.
import { existsSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestGrove } from './test-support/test-grove.ts';
import type { TestGroveOptions } from './test-support/test-grove.ts';
import type { GroveContext } from './context.ts';
import { GitFlow } from './git-flow.ts';
import type { Grove } from './index.ts';
import { FakeDriver } from './test-support/fake-driver.ts';
import { postTurnEnded } from './test-support/host-sock.ts';
import { scanRegistry } from './test-support/registry-scan.ts';
import { git, gitInWorktree, makeSourceRepo } from './test-support/repo.ts';
import { startTestForge } from './test-support/test-forge.ts';
import type { TestForge } from './test-support/test-forge.ts';

const TOKEN = 'forge-token-5f1d2c9a-never-written-anywhere';

let tmp: string;
let home: string;
let upstream: string;
let driver: FakeDriver;
let logs: string[];
let forge: TestForge | null;
const groves: Grove[] = [];

beforeEach(() => {
  tmp = mkdtempSync(join(tmpdir(), 'grove-flow-'));
  home = join(tmp, 'home');
  makeSourceRepo(join(tmp, 'src'));
  upstream = join(tmp, 'upstream.git');
  git(tmp, 'clone', '-q', '--bare', join(tmp, 'src'), upstream);
  driver = new FakeDriver();
  logs = [];
  forge = null;
});
afterEach(async () => {
  for (const g of groves.splice(0)) await g.close();
  await driver.closeAll();
  await forge?.close();
  rmSync(tmp, { recursive: true, force: true });
});

async function open(over: Partial<TestGroveOptions> = {}): Promise<Grove> {
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logs.push(chunk.toString('utf8'));
      done();
    },
  });
  const g = await createTestGrove({
    home,
    driver,
    image: 'grove-sandbox:test',
    maxRunning: 4,
    logger: pino({ level: 'trace' }, sink),
    healthTimeoutMs: 1_500,
    gitLockTimeoutMs: 5_000,
    forgeToken: TOKEN,
    ...over,
  });
  groves.push(g);
  return g;
}

/** A clone of upstream to play "someone else" pushing to it. */
function otherClone(): string {
  const dir = join(tmp, `other-${Math.random().toString(16).slice(2)}`);
  git(tmp, 'clone', '-q', `file://${upstream}`, dir);
  return dir;
}

/**
 * Someone else's commit on `branch` of the upstream, pushed from a clone of their own (with `alsoPush`, more
 * refspecs in the same push): what Grove's primary clone has not seen.
 */
function pushFromElsewhere(o: { branch: string; file: string; text: string; message: string; alsoPush?: string[] }): void {
  const other = otherClone();
  if (o.branch !== 'main') git(other, 'checkout', '-q', o.branch);
  writeFileSync(join(other, o.file), o.text);
  git(other, 'add', '.');
  git(other, 'commit', '-q', '-m', o.message);
  git(other, 'push', '-q', 'origin', o.branch, ...(o.alsoPush ?? []));
}

function worktree(name: string): string {
  return join(home, 'worktrees', 'demo', name);
}

describe('projects from real repositories', () => {
  it('clones from a file:// URL and from a local path, detecting the default branch', async () => {
    const g = await open();
    const viaUrl = await g.addProject({ name: 'demo', source: `file://${upstream}`, createDefault: false, failIfExists: true });
    expect(viaUrl).toMatchObject({ name: 'demo', defaultBranch: 'main' });
    expect(git(join(home, 'repos', 'demo'), 'rev-parse', '--is-bare-repository')).toBe('true');
    expect(git(join(home, 'repos', 'demo'), 'config', '--get', 'remote.origin.url')).toBe(`file://${upstream}`);

    git(upstream, 'symbolic-ref', 'HEAD', 'refs/heads/feature');
    const viaPath = await g.addProject({ name: 'other', source: upstream, createDefault: false, failIfExists: true });
    expect(viaPath.defaultBranch).toBe('feature');
    await expect(g.addProject({ name: 'demo', source: upstream, createDefault: false, failIfExists: true })).rejects.toMatchObject({ code: 'project_exists', status: 409 });
  });

  it('of two concurrent adds of one name, exactly one wins', async () => {
    const g = await open();
    const both = await Promise.allSettled([0, 1].map(() => g.addProject({ name: 'twice', source: `file://${upstream}`, createDefault: false, failIfExists: true })));
    expect(both.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    expect(both.find((r) => r.status === 'rejected')).toMatchObject({ reason: { code: 'project_exists' } });
    expect(await g.events({ slug: 'twice', type: 'project.added' })).toHaveLength(1);
  });

  it('refuses option injection and foreign transports before git runs, and explains an unreachable remote, leaving nothing behind', async () => {
    const g = await open();
    for (const source of ['-uhelp', '--upload-pack=touch /tmp/x', 'ext::sh -c id', 'relative/path', 'file:///x\nfoo', 'https://user:pw@example.invalid/r.git', 'git@-oProxyCommand=x:r']) {
      await expect(g.addProject({ name: 'demo', source, createDefault: false })).rejects.toMatchObject({ code: 'invalid_input' });
    }
    await expect(g.addProject({ name: 'demo', source: 'http://127.0.0.1:1/nothing.git', createDefault: false })).rejects.toMatchObject({
      code: 'remote_failed',
      details: { op: 'clone', reason: 'unreachable' },
    });
    await expect(g.addProject({ name: 'demo', source: join(tmp, 'src', 'README.md'), createDefault: false })).rejects.toMatchObject({ code: 'invalid_input' });
    expect(readdirSync(join(home, 'repos'))).toEqual([]);
    expect(await g.listProjects()).toEqual([]);
  });
});

describe('fetch before fork', () => {
  it('sees a new upstream commit and a deleted upstream branch, and keeps grove/* branches', async () => {
    const g = await open();
    await g.addProject({ name: 'demo', source: `file://${upstream}`, createDefault: false });
    await g.fork({ project: 'demo', name: 'first' });
    pushFromElsewhere({ branch: 'main', file: 'upstream.txt', text: 'new upstream work\n', message: 'upstream work', alsoPush: [':feature'] });

    await g.fork({ project: 'demo', name: 'second' });
    expect(readFileSync(join(worktree('second'), 'upstream.txt'), 'utf8')).toBe('new upstream work\n');
    const heads = git(join(home, 'repos', 'demo'), 'for-each-ref', '--format=%(refname:short)', 'refs/heads/').split('\n');
    expect(heads).toContain('grove/first');
    expect(heads).not.toContain('feature');
  });

  it('shares a fetch that started after a fork was asked for (another fork\'s, while it waited), and runs its own otherwise', async () => {
    // The primary clone as Grove keeps it (bare, origin set), and git flow with only what this needs of a context.
    const primary = join(tmp, 'primary.git');
    git(tmp, 'clone', '-q', '--bare', `file://${upstream}`, primary);
    const emitted: string[] = [];
    const ctx = {
      paths: { repo: () => primary },
      log: pino({ level: 'silent' }),
      emit: async (_slug: string, type: string) => void emitted.push(type),
    } as unknown as GroveContext;
    const flow = new GitFlow(ctx, { forgeToken: null, sshCommand: null, owner: null });
    const push = (file: string): string => {
      const other = otherClone();
      writeFileSync(join(other, file), `${file}\n`);
      git(other, 'add', '.');
      git(other, 'commit', '-q', '-m', file);
      git(other, 'push', '-q', 'origin', 'main');
      return git(other, 'rev-parse', 'HEAD');
    };
    const askedFirst = performance.now();
    const first = push('one.txt');
    expect(await flow.fetchBeforeFork('demo', 'demo~a', performance.now())).toEqual({ ok: true });
    expect(git(primary, 'rev-parse', 'main')).toBe(first);
    // Asked for before that fetch started: it is as fresh as this fork's own would be, so none runs.
    const second = push('two.txt');
    expect(await flow.fetchBeforeFork('demo', 'demo~b', askedFirst)).toEqual({ ok: true, shared: true });
    expect(git(primary, 'rev-parse', 'main')).toBe(first);
    // Asked for after it: a fetch of its own, which brings what was pushed since.
    expect(await flow.fetchBeforeFork('demo', 'demo~c', performance.now())).toEqual({ ok: true });
    expect(git(primary, 'rev-parse', 'main')).toBe(second);
    expect(emitted).toEqual([]);
  });

  it('forks from what the clone holds when the remote is unreachable, and records why', async () => {
    const g = await open();
    await g.addProject({ name: 'demo', source: `file://${upstream}`, createDefault: false });
    renameSync(upstream, `${upstream}.moved`);
    const ws = await g.fork({ project: 'demo', name: 'offline' });
    expect(ws.state).toBe('running');
    const failed = await g.events({ slug: 'demo~offline', type: 'project.fetch_failed' });
    expect(failed).toHaveLength(1);
    expect(String(failed[0]?.data.reason)).toMatch(/does not appear to be a git repository/);
  });
});

describe('checkpoint', () => {
  it('commits modified and untracked files (not ignored ones) with the configured author, and leaves the worktree clean', async () => {
    const g = await open();
    await g.addProject({ name: 'demo', source: `file://${upstream}`, createDefault: false });
    await g.setProjectConfig('demo', { git: { authorName: 'Ada Lovelace', authorEmail: 'ada@example.test' } });
    await g.fork({ project: 'demo', name: 'cp' });
    const wt = worktree('cp');
    writeFileSync(join(wt, 'app.txt'), 'v2\n');
    writeFileSync(join(wt, 'new.txt'), 'new\n');
    writeFileSync(join(wt, '.gitignore'), '*.log\n');
    writeFileSync(join(wt, 'debug.log'), 'noise\n');

    const cp = await g.checkpoint('demo~cp', { message: 'work in progress' });
    expect(cp.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(cp.files.sort()).toEqual(['.gitignore', 'app.txt', 'new.txt']);
    const repo = join(home, 'repos', 'demo');
    expect(git(repo, 'rev-parse', 'refs/heads/grove/cp')).toBe(cp.commit);
    expect(git(repo, 'log', '-1', '--format=%an <%ae>|%cn <%ce>|%s', 'grove/cp')).toBe('Ada Lovelace <ada@example.test>|Ada Lovelace <ada@example.test>|work in progress');
    expect(git(repo, 'show', 'grove/cp:new.txt')).toBe('new');
    expect(() => git(repo, 'show', 'grove/cp:debug.log')).toThrow();
    // The worktree's own index was replaced by the checkpoint's, so the sandbox sees a clean tree.
    expect(gitInWorktree(wt, 'status', '--porcelain')).toBe('');
    const events = await g.events({ slug: 'demo~cp', type: 'workspace.checkpoint' });
    expect(events.map((e) => e.data.commit)).toEqual([cp.commit]);

    expect(await g.checkpoint('demo~cp')).toEqual({ commit: null, branch: 'grove/cp', files: [] });
    // An empty message never reaches core: the server refuses it (git-flow-api.test.ts).
    await expect(g.checkpoint('demo~nope')).rejects.toMatchObject({ code: 'workspace_not_found' });
  });

  it('never follows a worktree .git that names another workspace\'s admin dir: the checkpoint is its own, the other is untouched', async () => {
    const g = await open();
    await g.addProject({ name: 'demo', source: `file://${upstream}`, createDefault: false });
    await g.fork({ project: 'demo', name: 'a' });
    await g.fork({ project: 'demo', name: 'b' });
    const repo = join(home, 'repos', 'demo');
    const other = join(repo, 'worktrees', 'b');
    const index = readFileSync(join(other, 'index'));
    const bTip = git(repo, 'rev-parse', 'grove/b');
    writeFileSync(join(worktree('a'), '.git'), `gitdir: ${other}\n`);
    writeFileSync(join(worktree('a'), 'x.txt'), 'x\n');
    const cp = await g.checkpoint('demo~a');
    expect(cp.files).toEqual(['x.txt']);
    expect(git(repo, 'rev-parse', 'grove/a')).toBe(cp.commit);
    expect(readFileSync(join(other, 'index')).equals(index)).toBe(true);
    expect(git(repo, 'rev-parse', 'grove/b')).toBe(bTip);
  });

  it('defaults to Grove <grove@localhost> and works while the workspace is stopped', async () => {
    const g = await open();
    await g.addProject({ name: 'demo', source: `file://${upstream}`, createDefault: false });
    await g.fork({ project: 'demo', name: 'cp' });
    await g.stop('demo~cp');
    writeFileSync(join(worktree('cp'), 'x.txt'), 'x\n');
    const cp = await g.checkpoint('demo~cp');
    expect(git(join(home, 'repos', 'demo'), 'log', '-1', '--format=%an <%ae>|%s', cp.commit ?? '')).toBe('Grove <grove@localhost>|grove: checkpoint of demo~cp');
  });
});

/** What the backend does when a turn ends: POST /turn-ended on the workspace's host.sock. */
async function turnEnded(slug: string, turn: string): Promise<number> {
  return (await postTurnEnded(home, slug, { turn, status: 'completed' })).status;
}

function userLine(turn: string, text: string): string {
  return `${JSON.stringify({ seq: 1, turn, at: new Date().toISOString(), kind: 'user', text })}\n`;
}

describe('checkpoint after a turn', () => {
  it('commits a turn that changed files with its first message line as the subject, unless the project turns it off', async () => {
    const g = await open();
    await g.addProject({ name: 'demo', source: `file://${upstream}`, createDefault: false });
    await g.fork({ project: 'demo', name: 't' });
    const repo = join(home, 'repos', 'demo');
    const start = git(repo, 'rev-parse', 'grove/t');

    // Turned off: turns do not move the branch.
    await g.setProjectConfig('demo', { git: { checkpointAfterTurn: false } });
    writeFileSync(join(worktree('t'), 'one.txt'), '1\n');
    expect(await turnEnded('demo~t', 'turn-1')).toBe(200);
    expect(git(repo, 'rev-parse', 'grove/t')).toBe(start);

    // The default (a git section without checkpointAfterTurn, as with none at all): on.
    await g.setProjectConfig('demo', { git: { authorName: 'Ada', authorEmail: 'ada@example.test' } });
    writeFileSync(join(home, 'threads', 'demo~t', 'thread.jsonl'), userLine('turn-1', 'ignored') + userLine('turn-2', '\n  Add the second file\u0007 please\nand more detail'));
    writeFileSync(join(worktree('t'), 'two.txt'), '2\n');
    expect(await turnEnded('demo~t', 'turn-2')).toBe(200);
    expect(git(repo, 'log', '-1', '--format=%an|%s', 'grove/t')).toBe('Ada|Add the second file please');
    expect(git(repo, 'log', '-1', '--format=%b', 'grove/t')).toContain('two.txt');
    expect(git(repo, 'show', 'grove/t:one.txt')).toBe('1');
    expect(gitInWorktree(worktree('t'), 'status', '--porcelain')).toBe('');

    // A turn that changed nothing commits nothing.
    const tip = git(repo, 'rev-parse', 'grove/t');
    expect(await turnEnded('demo~t', 'turn-3')).toBe(200);
    expect(git(repo, 'rev-parse', 'grove/t')).toBe(tip);
  });
});

describe('diff', () => {
  it('lists files and the patch against the fork point, with ahead/behind, checkpointed or not', async () => {
    const g = await open();
    await g.addProject({ name: 'demo', source: `file://${upstream}`, createDefault: false });
    await g.fork({ project: 'demo', name: 'd' });
    const wt = worktree('d');
    writeFileSync(join(wt, 'app.txt'), 'v2\n');
    await g.checkpoint('demo~d');
    writeFileSync(join(wt, 'later.txt'), 'one\ntwo\n');
    rmSync(join(wt, 'README.md'));
    // main moves on upstream; the next fork's fetch brings it into the primary clone.
    pushFromElsewhere({ branch: 'main', file: 'upstream.txt', text: 'u\n', message: 'upstream' });
    await g.fork({ project: 'demo', name: 'e' });

    const d = await g.diff('demo~d');
    expect(d).toMatchObject({ branch: 'grove/d', defaultBranch: 'main', uncommitted: true, ahead: 1, behind: 1, truncated: false });
    expect(d.files).toEqual([
      { path: 'README.md', status: 'D', additions: 0, deletions: 1 },
      { path: 'app.txt', status: 'M', additions: 1, deletions: 1 },
      { path: 'later.txt', status: 'A', additions: 2, deletions: 0 },
    ]);
    expect(d.patch).toContain('+++ b/later.txt');
    expect(d.patch).not.toContain('upstream.txt');

    const small = await g.diff('demo~d', { maxBytes: 1024 });
    expect(small.truncated).toBe(false);
    writeFileSync(join(wt, 'big.txt'), 'line of text\n'.repeat(1000));
    const cut = await g.diff('demo~d', { maxBytes: 1024 });
    expect(cut.truncated).toBe(true);
    expect(Buffer.byteLength(cut.patch)).toBeLessThanOrEqual(1024);
  });
});

describe('publish', () => {
  async function publishable(): Promise<Grove> {
    forge = await startTestForge({ bare: upstream, owner: 'team', repo: 'demo', token: TOKEN });
    const g = await open();
    await g.addProject({ name: 'demo', source: `file://${upstream}`, createDefault: false });
    await g.setProjectConfig('demo', { forge: { kind: 'gitea', baseUrl: forge.baseUrl, owner: 'team', repo: 'demo' } });
    await g.fork({ project: 'demo', name: 'pr' });
    writeFileSync(join(worktree('pr'), 'feature.md'), '# a feature\n');
    return g;
  }

  it('checkpoints, pushes the branch and opens a pull request with the right head and base; the token is nowhere', async () => {
    const g = await publishable();
    const out = await g.publish('demo~pr', { title: 'A feature', body: 'Please review.' });
    expect(out.checkpoint.files).toEqual(['feature.md']);
    expect(out.pushed).toEqual({ branch: 'grove/pr', commit: out.checkpoint.commit });
    expect(git(upstream, 'rev-parse', 'refs/heads/grove/pr')).toBe(out.checkpoint.commit);
    expect(forge?.pulls).toEqual([{ number: 1, head: 'grove/pr', base: 'main', title: 'A feature', body: 'Please review.', state: 'open', merged: false, endedAt: null }]);
    expect(out.pullRequest).toEqual({ url: `${forge?.baseUrl}/team/demo/pulls/1`, number: 1, state: 'open' });
    expect((await g.get('demo~pr')).pullRequest).toEqual(out.pullRequest);
    expect(forge?.requests.every((r) => r.endsWith(`token ${TOKEN}`))).toBe(true);

    // Publishing again pushes the new commit and keeps the open pull request.
    writeFileSync(join(worktree('pr'), 'feature.md'), '# a feature, revised\n');
    const again = await g.publish('demo~pr');
    expect(again.pullRequest.number).toBe(1);
    expect(forge?.pulls).toHaveLength(1);
    expect(git(upstream, 'rev-parse', 'refs/heads/grove/pr')).toBe(again.checkpoint.commit);

    const types = (await g.events({ slug: 'demo~pr', limit: 1000 })).map((e) => e.type);
    expect(types).toEqual(expect.arrayContaining(['workspace.checkpoint', 'workspace.pushed', 'workspace.published']));
    // The token is in no config, remote URL, event or log line.
    const repo = join(home, 'repos', 'demo');
    expect(readFileSync(join(repo, 'config'), 'utf8')).not.toContain(TOKEN);
    expect(readFileSync(join(home, 'config', 'demo.json'), 'utf8')).not.toContain(TOKEN);
    expect(JSON.stringify(await g.events({ limit: 1000 }))).not.toContain(TOKEN);
    // The registry, read through SQL (rows still in the WAL included) and as raw files (grove.db, -wal, -shm).
    // The pull request's address, written by the last publish, proves the scan sees the newest rows.
    const registry = await scanRegistry(join(home, 'grove.db'));
    expect(registry.tables).toEqual(expect.arrayContaining(['projects', 'workspaces', 'events']));
    expect(registry.files).toContain(join(home, 'grove.db-wal'));
    expect(registry.text).toContain(out.pullRequest.url);
    expect(registry.text.includes(TOKEN)).toBe(false);
    expect(registry.raw.includes(TOKEN)).toBe(false);
    expect(logs.length).toBeGreaterThan(0);
    expect(logs.join('')).not.toContain(TOKEN);
  });

  it('pushes over http with the token only in the Authorization header of that push', async () => {
    forge = await startTestForge({ bare: upstream, owner: 'team', repo: 'demo', token: TOKEN });
    const g = await open();
    await g.addProject({ name: 'demo', source: forge.gitUrl, createDefault: false });
    await g.setProjectConfig('demo', { forge: { kind: 'gitea', baseUrl: forge.baseUrl, owner: 'team', repo: 'demo' } });
    await g.fork({ project: 'demo', name: 'pr' });
    writeFileSync(join(worktree('pr'), 'feature.md'), '# over http\n');
    const out = await g.publish('demo~pr');
    expect(git(upstream, 'rev-parse', 'refs/heads/grove/pr')).toBe(out.pushed.commit);
    const auth = `Basic ${Buffer.from(`grove:${TOKEN}`).toString('base64')}`;
    expect(forge.requests.some((r) => r.includes('git-receive-pack') && r.endsWith(auth))).toBe(true);
    // Reads (clone, fetch) never carried it.
    expect(forge.requests.filter((r) => r.includes('git-upload-pack')).every((r) => !r.includes(auth))).toBe(true);
    const repo = join(home, 'repos', 'demo');
    expect(readFileSync(join(repo, 'config'), 'utf8')).not.toContain(TOKEN);
    expect(readFileSync(join(repo, 'config'), 'utf8')).not.toContain(Buffer.from(`grove:${TOKEN}`).toString('base64'));
    expect(logs.join('')).not.toContain(TOKEN);

    // Without the token the same push is refused by the remote and explained.
    const g2 = await open({ forgeToken: 'not-the-token' });
    writeFileSync(join(worktree('pr'), 'feature.md'), '# again\n');
    await expect(g2.publish('demo~pr')).rejects.toMatchObject({ code: 'remote_failed', details: { reason: 'auth' } });
  });

  it('explains a push rejected as non-fast-forward and records it; nothing on the remote is overwritten', async () => {
    const g = await publishable();
    await g.publish('demo~pr');
    pushFromElsewhere({ branch: 'grove/pr', file: 'theirs.txt', text: 'theirs\n', message: 'someone else' });
    const theirs = git(upstream, 'rev-parse', 'refs/heads/grove/pr');

    writeFileSync(join(worktree('pr'), 'mine.txt'), 'mine\n');
    const err = await g.publish('demo~pr').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'push_rejected', status: 409, details: { reason: 'non_fast_forward' } });
    expect((err as Error).message).toMatch(/someone else pushed to it/);
    expect(git(upstream, 'rev-parse', 'refs/heads/grove/pr')).toBe(theirs);
    const failed = await g.events({ slug: 'demo~pr', type: 'publish.failed' });
    expect(failed.map((e) => [e.data.step, e.data.code])).toEqual([['push', 'push_rejected']]);
  });

  it('takes the pushed branch back when the pull request cannot be opened', async () => {
    const g = await publishable();
    if (forge) forge.failWith = 500;
    await expect(g.publish('demo~pr')).rejects.toMatchObject({ code: 'forge_failed', status: 502 });
    expect(() => git(upstream, 'rev-parse', '--verify', '--quiet', 'refs/heads/grove/pr')).toThrow();
    const failed = await g.events({ slug: 'demo~pr', type: 'publish.failed' });
    expect(failed[0]?.data).toMatchObject({ step: 'pull-request', undone: 'deleted the branch this publish created on the remote' });
    expect((await g.get('demo~pr')).pullRequest).toBeNull();

    if (forge) forge.failWith = null;
    const out = await g.publish('demo~pr');
    expect(out.pullRequest.number).toBe(1);
  });

  it('refuses before changing anything without a forge, a token or a remote', async () => {
    const g = await open({ forgeToken: null });
    await g.addProject({ name: 'demo', source: `file://${upstream}`, createDefault: false });
    await g.fork({ project: 'demo', name: 'pr' });
    writeFileSync(join(worktree('pr'), 'feature.md'), 'x\n');
    await expect(g.publish('demo~pr')).rejects.toMatchObject({ code: 'not_configured', details: { missing: 'forge' } });
    await g.setProjectConfig('demo', { forge: { kind: 'gitea', baseUrl: 'http://127.0.0.1:1', owner: 'team', repo: 'demo' } });
    await expect(g.publish('demo~pr')).rejects.toMatchObject({ code: 'not_configured', details: { missing: 'token' } });
    git(join(home, 'repos', 'demo'), 'remote', 'remove', 'origin');
    const g2 = await open();
    await expect(g2.publish('demo~pr')).rejects.toMatchObject({ code: 'not_configured', details: { missing: 'remote' } });
    // Nothing was committed on the way.
    expect(git(join(home, 'repos', 'demo'), 'rev-parse', 'grove/pr')).toBe(git(join(home, 'repos', 'demo'), 'rev-parse', 'main'));
    expect(existsSync(join(worktree('pr'), 'feature.md'))).toBe(true);
  });

  it('five workspaces checkpointing and publishing at once: all published, repositories fsck-clean', async () => {
    forge = await startTestForge({ bare: upstream, owner: 'team', repo: 'demo', token: TOKEN });
    const g = await open({ maxRunning: 6 });
    await g.addProject({ name: 'demo', source: `file://${upstream}`, createDefault: false });
    await g.setProjectConfig('demo', { forge: { kind: 'gitea', baseUrl: forge.baseUrl, owner: 'team', repo: 'demo' } });
    const names = ['w1', 'w2', 'w3', 'w4', 'w5'];
    for (const n of names) {
      await g.fork({ project: 'demo', name: n });
      writeFileSync(join(worktree(n), `${n}.txt`), `${n}\n`);
    }
    const results = await Promise.all(names.map((n) => Promise.all([g.checkpoint(`demo~${n}`), g.publish(`demo~${n}`, { title: n })])));
    for (const [i, n] of names.entries()) {
      const [, published] = results[i] ?? [];
      expect(git(upstream, 'rev-parse', `refs/heads/grove/${n}`)).toBe(published?.pushed.commit);
      expect(git(upstream, 'show', `grove/${n}:${n}.txt`)).toBe(n);
    }
    expect(forge.pulls.map((p) => p.head).sort()).toEqual(names.map((n) => `grove/${n}`));
    for (const repo of [upstream, join(home, 'repos', 'demo')]) expect(() => git(repo, 'fsck', '--strict', '--no-progress')).not.toThrow();
  });
});

describe('fork from a pull request', () => {
  it("starts at the pull request's head fetched from the remote, or at the default branch with the reason recorded", async () => {
    forge = await startTestForge({ bare: upstream, owner: 'team', repo: 'demo', token: TOKEN });
    const g = await open();
    await g.addProject({ name: 'demo', source: `file://${upstream}`, createDefault: false });
    await g.setProjectConfig('demo', { forge: { kind: 'gitea', baseUrl: forge.baseUrl, owner: 'team', repo: 'demo' } });
    await g.fork({ project: 'demo', name: 'pr' });
    writeFileSync(join(worktree('pr'), 'feature.md'), '# a feature\n');
    await g.publish('demo~pr');
    // A reviewer pushes to the pull request from elsewhere: the primary clone never fetches grove/*, so only
    // the pull request's head can bring this commit.
    pushFromElsewhere({ branch: 'grove/pr', file: 'review.md', text: 'suggested\n', message: 'review suggestion' });
    git(upstream, 'update-ref', 'refs/pull/1/head', 'refs/heads/grove/pr');

    const ws = await g.fork({ project: 'demo', name: 'review', pullRequest: 1 });
    expect(ws).toMatchObject({ state: 'running', baseRef: 'refs/grove-pr/1/head' });
    expect(readFileSync(join(worktree('review'), 'review.md'), 'utf8')).toBe('suggested\n');
    const repo = join(home, 'repos', 'demo');
    expect(git(repo, 'rev-parse', 'refs/grove-pr/1/head')).toBe(git(upstream, 'rev-parse', 'refs/heads/grove/pr'));
    expect(git(repo, 'rev-parse', 'refs/heads/grove/review')).toBe(git(upstream, 'rev-parse', 'refs/heads/grove/pr'));
    expect(await g.events({ slug: 'demo~review', type: 'workspace.base_fallback' })).toEqual([]);

    const missing = await g.fork({ project: 'demo', name: 'nine', pullRequest: 9 });
    expect(missing).toMatchObject({ state: 'running', baseRef: 'main' });
    expect(existsSync(join(worktree('nine'), 'feature.md'))).toBe(false);
    expect(git(repo, 'rev-parse', 'refs/heads/grove/nine')).toBe(git(repo, 'rev-parse', 'main'));
    const fell = await g.events({ slug: 'demo~nine', type: 'workspace.base_fallback' });
    expect(fell).toHaveLength(1);
    expect(fell[0]?.data).toMatchObject({ wanted: 'pull request #9', base: 'main' });
    expect(String(fell[0]?.data.reason)).toMatch(/refs\/pull\/9\/head/);

    renameSync(upstream, `${upstream}.moved`);
    const offline = await g.fork({ project: 'demo', name: 'offline', pullRequest: 1 });
    expect(offline).toMatchObject({ state: 'running', baseRef: 'main' });
    const why = await g.events({ slug: 'demo~offline', type: 'workspace.base_fallback' });
    expect(String(why[0]?.data.reason)).toMatch(/could not be fetched: .*does not appear to be a git repository/s);
  });
});

describe('pull-request watcher', () => {
  async function published(config: Record<string, unknown> = {}): Promise<Grove> {
    forge = await startTestForge({ bare: upstream, owner: 'team', repo: 'demo', token: TOKEN });
    const g = await open();
    await g.addProject({ name: 'demo', source: `file://${upstream}`, createDefault: false });
    await g.setProjectConfig('demo', { forge: { kind: 'gitea', baseUrl: forge.baseUrl, owner: 'team', repo: 'demo' }, ...config });
    await g.fork({ project: 'demo', name: 'pr' });
    writeFileSync(join(worktree('pr'), 'feature.md'), '# a feature\n');
    await g.publish('demo~pr');
    return g;
  }

  it('tears a workspace down when its pull request is merged and nothing changed after, keeping the branch', async () => {
    const g = await published();
    expect((await g.watchPullRequests()).changed).toEqual([]);
    forge?.merge(1);
    const r = await g.watchPullRequests();
    expect(r.changed).toEqual([{ slug: 'demo~pr', from: 'open', to: 'merged', cleaned: true }]);
    expect(r.fetched).toEqual(['demo']);
    const ws = await g.get('demo~pr');
    expect(ws.state).toBe('gone');
    expect(ws.pullRequest?.state).toBe('merged');
    expect(ws.cleanupHeld).toBeNull();
    expect(existsSync(worktree('pr'))).toBe(false);
    const repo = join(home, 'repos', 'demo');
    expect(git(repo, 'rev-parse', 'grove/pr')).toBe(git(repo, 'rev-parse', 'main'));
    const types = (await g.events({ slug: 'demo~pr', limit: 1000 })).map((e) => e.type);
    expect(types.slice(types.indexOf('workspace.pr_state'))).toEqual(expect.arrayContaining(['workspace.pr_state', 'workspace.cleaned']));
    expect(types).not.toContain('workspace.kept');
    expect(await g.savedWork('demo~pr')).toEqual([]);
  });

  it('keeps a merged workspace with uncommitted work, says why once, and cleans up when the work is gone', async () => {
    const g = await published();
    const repo = join(home, 'repos', 'demo');
    const pushed = git(repo, 'rev-parse', 'grove/pr');
    forge?.merge(1);
    writeFileSync(join(worktree('pr'), 'after.md'), 'late\n');
    writeFileSync(join(worktree('pr'), 'feature.md'), '# a feature, edited after the merge\n');
    const r = await g.watchPullRequests();
    expect(r.changed).toEqual([{ slug: 'demo~pr', from: 'open', to: 'merged', cleaned: false, held: '2 files changed since' }]);
    expect(await g.get('demo~pr')).toMatchObject({ state: 'running', cleanupHeld: '2 files changed since', pullRequest: { state: 'merged' } });
    // Nothing lost, nothing moved.
    expect(readFileSync(join(worktree('pr'), 'after.md'), 'utf8')).toBe('late\n');
    expect(readFileSync(join(worktree('pr'), 'feature.md'), 'utf8')).toBe('# a feature, edited after the merge\n');
    expect(git(repo, 'rev-parse', 'grove/pr')).toBe(pushed);
    expect(await g.savedWork('demo~pr')).toEqual([]);
    // Later passes look again, record nothing new while the work is there, and refresh the reason.
    rmSync(join(worktree('pr'), 'after.md'));
    expect((await g.watchPullRequests()).changed).toEqual([]);
    expect((await g.get('demo~pr')).cleanupHeld).toBe('1 file changed since');
    const kept = await g.events({ slug: 'demo~pr', type: 'workspace.kept' });
    expect(kept).toHaveLength(1);
    expect(kept[0]?.data).toMatchObject({ reason: '2 files changed since', pr: 1, state: 'merged' });
    // The user puts it back as merged: nothing holds it any more.
    writeFileSync(join(worktree('pr'), 'feature.md'), '# a feature\n');
    expect((await g.watchPullRequests()).changed).toEqual([{ slug: 'demo~pr', from: 'merged', to: 'merged', cleaned: true }]);
    expect(await g.get('demo~pr')).toMatchObject({ state: 'gone', cleanupHeld: null });
  });

  it('keeps a merged workspace whose branch has a commit after the merged head', async () => {
    const g = await published();
    const repo = join(home, 'repos', 'demo');
    writeFileSync(join(worktree('pr'), 'more.md'), 'more\n');
    const cp = await g.checkpoint('demo~pr', { message: 'after publishing' });
    forge?.merge(1);
    const r = await g.watchPullRequests();
    expect(r.changed).toEqual([{ slug: 'demo~pr', from: 'open', to: 'merged', cleaned: false, held: "1 commit after the pull request's head" }]);
    expect(await g.get('demo~pr')).toMatchObject({ state: 'running', cleanupHeld: "1 commit after the pull request's head" });
    expect(git(repo, 'rev-parse', 'grove/pr')).toBe(cp.commit);
    expect(existsSync(join(worktree('pr'), 'more.md'))).toBe(true);
    // Publishing again opens a new pull request for it; the hold is over.
    const again = await g.publish('demo~pr');
    expect(again.pullRequest).toMatchObject({ number: 2, state: 'open' });
    expect((await g.get('demo~pr')).cleanupHeld).toBeNull();
  });

  it('honours the workspace\'s keepCheckoutOnClose over the project\'s, set at fork or by update', async () => {
    const g = await published({ keepCheckoutOnClose: true });
    await g.fork({ project: 'demo', name: 'go', keepCheckoutOnClose: false });
    expect((await g.get('demo~go')).keepCheckoutOnClose).toBe(false);
    writeFileSync(join(worktree('go'), 'go.md'), 'go\n');
    await g.publish('demo~go');
    expect((await g.update('demo~pr', { keepCheckoutOnClose: false })).keepCheckoutOnClose).toBe(false);
    forge?.merge(1);
    forge?.closePull(2);
    let r = await g.watchPullRequests();
    expect(r.changed).toEqual([
      { slug: 'demo~pr', from: 'open', to: 'merged', cleaned: true },
      { slug: 'demo~go', from: 'open', to: 'closed', cleaned: true },
    ]);
    // And the other way: the project cleans up, the workspace keeps.
    await g.setProjectConfig('demo', { forge: { kind: 'gitea', baseUrl: forge?.baseUrl, owner: 'team', repo: 'demo' }, keepCheckoutOnClose: false });
    await g.fork({ project: 'demo', name: 'keep' });
    writeFileSync(join(worktree('keep'), 'keep.md'), 'keep\n');
    await g.publish('demo~keep');
    expect((await g.update('demo~keep', { keepCheckoutOnClose: true })).keepCheckoutOnClose).toBe(true);
    forge?.closePull(3);
    r = await g.watchPullRequests();
    expect(r.changed).toEqual([{ slug: 'demo~keep', from: 'open', to: 'closed', cleaned: false }]);
    expect(await g.get('demo~keep')).toMatchObject({ state: 'running', cleanupHeld: null, keepCheckoutOnClose: true });
    await expect(g.update('demo~keep', { keepCheckoutOnClose: 'yes' } as never)).rejects.toMatchObject({ code: 'invalid_input' });
  });

  it('keeps the checkout of a closed pull request when the project says keepCheckoutOnClose', async () => {
    const g = await published({ keepCheckoutOnClose: true });
    forge?.closePull(1);
    const r = await g.watchPullRequests();
    expect(r.changed).toEqual([{ slug: 'demo~pr', from: 'open', to: 'closed', cleaned: false }]);
    expect(await g.get('demo~pr')).toMatchObject({ state: 'running', pullRequest: { state: 'closed' } });
    expect(existsSync(join(worktree('pr'), 'feature.md'))).toBe(true);
    expect((await g.watchPullRequests()).changed).toEqual([]);
  });

  it('falls back to the branch being contained in the default branch when the forge cannot answer', async () => {
    const g = await published();
    if (forge) forge.failWith = 503;
    expect((await g.watchPullRequests()).changed).toEqual([]);
    const other = otherClone();
    git(other, 'merge', '-q', '--ff-only', 'origin/grove/pr');
    git(other, 'push', '-q', 'origin', 'main');
    const r = await g.watchPullRequests();
    expect(r.changed).toEqual([{ slug: 'demo~pr', from: 'open', to: 'merged', cleaned: true }]);
    const change = await g.events({ slug: 'demo~pr', type: 'workspace.pr_state' });
    expect(change[0]?.data).toMatchObject({ source: 'branch', to: 'merged' });
  });
});

describe('pull request and its checks (the Review view)', () => {
  it('reads the state and the head commit\'s checks from the forge; nothing before publish; a failing forge is forge_failed', async () => {
    forge = await startTestForge({ bare: upstream, owner: 'team', repo: 'demo', token: TOKEN });
    const g = await open();
    await g.addProject({ name: 'demo', source: `file://${upstream}`, createDefault: false });
    await g.setProjectConfig('demo', { forge: { kind: 'gitea', baseUrl: forge.baseUrl, owner: 'team', repo: 'demo' } });
    await g.fork({ project: 'demo', name: 'pr' });
    // Not published yet: no pull request, and the forge is not asked.
    const before = forge.requests.length;
    expect(await g.pullRequest('demo~pr')).toEqual({ pullRequest: null, checks: null, cleanup: { keepCheckout: false, setBy: 'project', held: null } });
    expect(forge.requests).toHaveLength(before);

    writeFileSync(join(worktree('pr'), 'feature.md'), '# a feature\n');
    const out = await g.publish('demo~pr');
    const head = git(upstream, 'rev-parse', 'refs/heads/grove/pr');
    const none = await g.pullRequest('demo~pr');
    expect(none.pullRequest).toEqual({ url: out.pullRequest.url, number: 1, state: 'open', headSha: head });
    expect(none.checks).toEqual({ state: 'none', total: 0, success: 0, failure: 0, pending: 0, checks: [] });

    expect(forge.setStatus(1, { context: 'ci/test', state: 'failure', target_url: 'https://ci.example/run/1', description: 'two tests failed' })).toBe(head);
    forge.setStatus(1, { context: 'ci/build', state: 'success' });
    expect((await g.pullRequest('demo~pr')).checks).toEqual({
      state: 'failure',
      total: 2,
      success: 1,
      failure: 1,
      pending: 0,
      checks: [
        { name: 'ci/test', state: 'failure', url: 'https://ci.example/run/1', description: 'two tests failed' },
        { name: 'ci/build', state: 'success', url: null, description: null },
      ],
    });
    forge.setStatus(1, { context: 'ci/test', state: 'pending' });
    expect((await g.pullRequest('demo~pr')).checks).toMatchObject({ state: 'pending', pending: 1, success: 1 });
    forge.setStatus(1, { context: 'ci/test', state: 'success', target_url: 'https://ci.example/run/2' });
    expect((await g.pullRequest('demo~pr')).checks).toMatchObject({ state: 'success', total: 2, success: 2 });

    // The workspace's own keepCheckoutOnClose is named as its.
    await g.update('demo~pr', { keepCheckoutOnClose: true });
    expect((await g.pullRequest('demo~pr')).cleanup).toEqual({ keepCheckout: true, setBy: 'workspace', held: null });

    // Merged on the forge: the view sees it now; the stored state is the watcher's to change (with the cleanup).
    forge.merge(1);
    const merged = await g.pullRequest('demo~pr');
    expect(merged.pullRequest).toMatchObject({ state: 'merged', headSha: head });
    expect(merged.checks?.state).toBe('success');
    expect((await g.get('demo~pr')).pullRequest?.state).toBe('open');

    // A forge that fails is explained, never a crash; a forge taken out of the config is not_configured.
    forge.failWith = 503;
    await expect(g.pullRequest('demo~pr')).rejects.toMatchObject({ code: 'forge_failed', status: 502, details: { reason: 'error', status: 503 } });
    forge.failWith = null;
    await g.patchProjectConfig('demo', { forge: null });
    await expect(g.pullRequest('demo~pr')).rejects.toMatchObject({ code: 'not_configured', details: { missing: 'forge' } });
    await expect(g.pullRequest('demo~nothing')).rejects.toMatchObject({ code: 'workspace_not_found' });
  });
});
