// Merge-back against the real stack (docs/git-flow.md): a project from a file:// remote through the API, a real
// sandbox writing files, a host checkpoint the sandbox's git agrees with, the diff, and publish to a test Gitea
// on loopback, with the forge token in no log line, event, config or sandbox; merged there, the watcher cleans up.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckpointResponse, DiffResponse, GroveEvent, Project, PublishResponse, ThreadLine, Workspace } from '@grove/contracts';
import { startTestForge } from '../packages/core/src/test-support/test-forge.ts';
import type { TestForge } from '../packages/core/src/test-support/test-forge.ts';
import { TOKEN, cleanup, containerOf, dockerExec, git, makeHome, makeUpstream, openStream, startServer, waitFor, type RunningServer } from './harness.ts';
import { findSecretsInSandbox } from './support/secrets.ts';

const FORGE_TOKEN = 'e2e-forge-token-7c41d0b2-keep-out';
const OVERLAY_SECRET = 'overlay-secret-5d8e1f-never-committed';
const home = makeHome('gitflow');
const upstream = path.join(home, 'upstream.git');
let s: RunningServer;
let forge: TestForge;

beforeAll(async () => {
  makeUpstream(home, { 'README.md': '# app\n' });
  forge = await startTestForge({ bare: upstream, owner: 'team', repo: 'app', token: FORGE_TOKEN });
  s = await startServer({ home: path.join(home, 'grove'), env: { GROVE_DEMO: '0', GROVE_FORGE_TOKEN: FORGE_TOKEN, GROVE_WATCH_INTERVAL_MS: '500', GROVE_MAX_RUNNING: '8' } });
});

afterAll(async () => {
  await s?.stop();
  await forge?.close();
  cleanup(path.join(home, 'grove'));
  fs.rmSync(home, { recursive: true, force: true });
});

describe('git flow', () => {
  it('project from a file:// URL → fork → sandbox edits → checkpoint → diff → publish → merged → cleaned up; the token stays in the server', { timeout: 180_000 }, async () => {
    const added = await s.api<{ project: Project }>('POST', '/api/projects', { name: 'app', source: `file://${upstream}` });
    expect(added.status).toBe(201);
    expect(added.body.project).toMatchObject({ name: 'app', defaultBranch: 'main' });
    const cfg = await s.api('PUT', '/api/projects/app/config', {
      git: { authorName: 'Grace Hopper', authorEmail: 'grace@example.test' },
      forge: { kind: 'gitea', baseUrl: forge.baseUrl, owner: 'team', repo: 'app' },
    });
    expect(cfg.status).toBe(200);
    const fork = await s.api<{ workspace: Workspace }>('POST', '/api/workspaces', { project: 'app', name: 'feat' });
    expect(fork.status, JSON.stringify(fork.body)).toBe(201);

    const container = containerOf(s.instance, 'app~feat') ?? '';
    const w = dockerExec(container, ['sh', '-c', "cd /workspace && printf 'hello\\n' > hello.txt && printf '# app, edited\\n' > README.md"]);
    expect(w.code, w.out).toBe(0);

    const cp = await s.api<CheckpointResponse>('POST', '/api/workspaces/app~feat/checkpoint', { message: 'hello from the sandbox' });
    expect(cp.status, JSON.stringify(cp.body)).toBe(200);
    expect(cp.body.files.sort()).toEqual(['README.md', 'hello.txt']);
    // The sandbox's own git sees the checkpoint as its HEAD and a clean tree.
    const st = dockerExec(container, ['sh', '-c', 'cd /workspace && git status --porcelain && git log -1 --format=%an%n%s']);
    expect(st.code, st.out).toBe(0);
    expect(st.out.trim()).toBe('Grace Hopper\nhello from the sandbox');

    const diff = await s.api<DiffResponse>('GET', '/api/workspaces/app~feat/diff');
    expect(diff.body).toMatchObject({ ahead: 1, behind: 0, uncommitted: false });
    expect(diff.body.files.map((f) => `${f.status} ${f.path}`)).toEqual(['M README.md', 'A hello.txt']);

    const pub = await s.api<PublishResponse>('POST', '/api/workspaces/app~feat/publish', { title: 'Say hello' });
    expect(pub.status, JSON.stringify(pub.body)).toBe(200);
    expect(pub.body.pullRequest).toMatchObject({ number: 1, state: 'open' });
    expect(forge.pulls.map((p) => [p.head, p.base, p.title])).toEqual([['grove/feat', 'main', 'Say hello']]);
    expect(git(upstream, 'rev-parse', 'refs/heads/grove/feat')).toBe(cp.body.commit);
    expect((await s.api<{ workspace: Workspace }>('GET', '/api/workspaces/app~feat')).body.workspace.pullRequest).toEqual(pub.body.pullRequest);

    const events = (await s.api<{ events: GroveEvent[] }>('GET', '/api/events?limit=1000')).body.events;
    expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(['project.added', 'workspace.checkpoint', 'workspace.pushed', 'workspace.published']));
    expect(JSON.stringify(events)).not.toContain(FORGE_TOKEN);
    expect(s.logs.join('\n')).not.toContain(FORGE_TOKEN);
    expect(fs.readFileSync(path.join(home, 'grove', 'repos', 'app', 'config'), 'utf8')).not.toContain(FORGE_TOKEN);
    // Nowhere in the sandbox, by value: environments, process list, every file (the scan's controls prove it read them).
    expect(await findSecretsInSandbox(container, { GROVE_FORGE_TOKEN: FORGE_TOKEN, GROVE_TOKEN: TOKEN })).toEqual([]);

    // Merged on the forge: the watcher tears the workspace down and keeps its branch.
    forge.merge(1);
    const gone = await waitFor('app~feat cleaned up', async () => {
      const r = await s.api<{ workspace: Workspace }>('GET', '/api/workspaces/app~feat');
      return r.body.workspace.state === 'gone' ? r.body.workspace : undefined;
    });
    expect(gone.pullRequest?.state).toBe('merged');
    expect(containerOf(s.instance, 'app~feat')).toBeUndefined();
    expect(fs.existsSync(path.join(home, 'grove', 'worktrees', 'app', 'feat'))).toBe(false);
    expect(git(path.join(home, 'grove', 'repos', 'app'), 'rev-parse', 'grove/feat')).toBe(cp.body.commit);
    const after = (await s.api<{ events: GroveEvent[] }>('GET', '/api/events?slug=app~feat&limit=1000')).body.events.map((e) => e.type);
    expect(after).toEqual(expect.arrayContaining(['workspace.pr_state', 'workspace.cleaned']));
  });

  it('a turn is checkpointed with its message; the overlay reaches the sandbox and no commit; keepCheckoutOnClose keeps the checkout when merged', { timeout: 180_000 }, async () => {
    const put = await s.api('PUT', '/api/projects/app/overlay', { path: '.env', content: `API_KEY=${OVERLAY_SECRET}\n` });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    const fork = await s.api<{ workspace: Workspace }>('POST', '/api/workspaces', { project: 'app', name: 'keep', keepCheckoutOnClose: true });
    expect(fork.status, JSON.stringify(fork.body)).toBe(201);
    expect(fork.body.workspace.keepCheckoutOnClose).toBe(true);
    const container = containerOf(s.instance, 'app~keep') ?? '';
    // The agent reads it where the project needs it; it is the user's file, not the branch's.
    const read = dockerExec(container, ['sh', '-c', 'cat /workspace/.env && cd /workspace && git status --porcelain --untracked-files=all']);
    expect(read.code, read.out).toBe(0);
    expect(read.out).toBe(`API_KEY=${OVERLAY_SECRET}\n`);

    // A turn that writes a file: the branch moves by one commit whose subject is the message (default on).
    const repo = path.join(home, 'grove', 'repos', 'app');
    const before = git(repo, 'rev-parse', 'grove/keep');
    const stream = openStream(s, 'app~keep');
    await stream.ready;
    try {
      const sent = await s.api<{ turn: string }>('POST', '/w/app~keep/messages', { text: 'write notes.txt from a turn' });
      expect(sent.status).toBe(202);
      await stream.until((f) => f.type === 'line' && f.line.kind === 'turn_end' && f.line.turn === sent.body.turn, 120_000);
      const lines = (await s.api<{ lines: ThreadLine[] }>('GET', '/w/app~keep/thread')).body.lines.filter((l) => l.turn === sent.body.turn);
      expect(lines.at(-1)).toMatchObject({ kind: 'turn_end', status: 'completed' });
    } finally {
      stream.close();
    }
    const cp = await waitFor('the checkpoint after the turn', async () => {
      const tip = git(repo, 'rev-parse', 'grove/keep');
      return tip !== before ? tip : undefined;
    });
    expect(git(repo, 'rev-parse', `${cp}^`)).toBe(before);
    expect(git(repo, 'log', '-1', '--format=%s', cp)).toBe('write notes.txt from a turn');
    expect(git(repo, 'show', `${cp}:notes.txt`)).toBe('from a turn');

    const pub = await s.api<PublishResponse>('POST', '/api/workspaces/app~keep/publish', { title: 'Notes' });
    expect(pub.status, JSON.stringify(pub.body)).toBe(200);
    const n = pub.body.pullRequest.number;
    // The overlay file is in no commit of either repository and in no pushed ref.
    for (const r of [repo, upstream]) {
      const refs = git(r, 'for-each-ref', '--format=%(refname)').split('\n').filter(Boolean);
      expect(refs.length).toBeGreaterThan(0);
      expect(git(r, 'log', '--all', '--format=%H', '--', '.env')).toBe('');
      expect(() => git(r, 'grep', '-l', OVERLAY_SECRET, ...refs)).toThrow(); // git grep exits 1: no match
    }

    // Merged: kept, because this workspace asked for it; the card says why.
    forge.merge(n);
    const kept = await waitFor('app~keep marked merged', async () => {
      const r = await s.api<{ workspace: Workspace }>('GET', '/api/workspaces/app~keep');
      return r.body.workspace.pullRequest?.state === 'merged' ? r.body.workspace : undefined;
    });
    expect(kept.state).toBe('running');
    const prState = (await s.api<{ events: GroveEvent[] }>('GET', '/api/events?slug=app~keep&type=workspace.pr_state&limit=10')).body.events;
    expect(prState.map((e) => e.data)).toEqual([expect.objectContaining({ number: n, to: 'merged', cleanup: false })]);
    expect(containerOf(s.instance, 'app~keep')).toBeDefined();
    expect(fs.existsSync(path.join(home, 'grove', 'worktrees', 'app', 'keep', 'notes.txt'))).toBe(true);
    const types = (await s.api<{ events: GroveEvent[] }>('GET', '/api/events?slug=app~keep&limit=1000')).body.events.map((e) => e.type);
    expect(types).not.toContain('workspace.cleaned');
  });

  it('five real sandboxes of one repository checkpoint and publish at once: all published, both repositories fsck-clean', { timeout: 180_000 }, async () => {
    const names = ['p1', 'p2', 'p3', 'p4', 'p5'];
    const forks = await Promise.all(names.map((name) => s.api<{ workspace: Workspace }>('POST', '/api/workspaces', { project: 'app', name })));
    for (const f of forks) expect(f.status, JSON.stringify(f.body)).toBe(201);
    for (const name of names) {
      const w = dockerExec(containerOf(s.instance, `app~${name}`) ?? '', ['sh', '-c', `cd /workspace && printf '${name}\\n' > ${name}.txt && mkdir -p shared && printf '${name}\\n' > shared/${name}.md`]);
      expect(w.code, w.out).toBe(0);
    }
    const before = forge.pulls.length;
    const results = await Promise.all(
      names.map(async (name) => {
        const cp = await s.api<CheckpointResponse>('POST', `/api/workspaces/app~${name}/checkpoint`, { message: `work of ${name}` });
        const pub = await s.api<PublishResponse>('POST', `/api/workspaces/app~${name}/publish`, { title: `From ${name}` });
        return { name, cp, pub };
      }),
    );
    for (const { name, cp, pub } of results) {
      expect(cp.status, JSON.stringify(cp.body)).toBe(200);
      expect(cp.body.files.sort()).toEqual([`${name}.txt`, `shared/${name}.md`]);
      expect(pub.status, JSON.stringify(pub.body)).toBe(200);
      expect(git(upstream, 'rev-parse', `refs/heads/grove/${name}`)).toBe(cp.body.commit);
    }
    expect(forge.pulls.slice(before).map((p) => p.head).sort()).toEqual(names.map((n) => `grove/${n}`));
    for (const r of [upstream, path.join(home, 'grove', 'repos', 'app')]) expect(() => git(r, 'fsck', '--strict', '--no-progress')).not.toThrow();
  });
});
