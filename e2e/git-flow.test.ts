// Merge-back against the real stack (docs/git-flow.md): a project from a file:// remote through the API, a real
// sandbox writing files, a host checkpoint the sandbox's git agrees with, the diff, and publish to a test Gitea
// on loopback, with the forge token in no log line, event, config or sandbox; merged there, the watcher cleans up.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckpointResponse, DiffResponse, GroveEvent, Project, PublishResponse, Workspace } from '@grove/contracts';
import { startTestForge } from '../packages/core/src/test-support/test-forge.ts';
import type { TestForge } from '../packages/core/src/test-support/test-forge.ts';
import { cleanup, containerOf, dockerExec, git, makeHome, startServer, waitFor, type RunningServer } from './harness.ts';

const FORGE_TOKEN = 'e2e-forge-token-7c41d0b2-keep-out';
const home = makeHome('gitflow');
const upstream = path.join(home, 'upstream.git');
let s: RunningServer;
let forge: TestForge;

beforeAll(async () => {
  const src = path.join(home, 'src');
  fs.mkdirSync(src, { recursive: true });
  git(src, 'init', '-q', '-b', 'main');
  fs.writeFileSync(path.join(src, 'README.md'), '# app\n');
  git(src, '-c', 'user.name=T', '-c', 'user.email=t@example.test', 'add', '.');
  git(src, '-c', 'user.name=T', '-c', 'user.email=t@example.test', 'commit', '-q', '-m', 'first');
  git(home, 'clone', '-q', '--bare', src, upstream);
  forge = await startTestForge({ bare: upstream, owner: 'team', repo: 'app', token: FORGE_TOKEN });
  s = await startServer({ home: path.join(home, 'grove'), env: { GROVE_DEMO: '0', GROVE_FORGE_TOKEN: FORGE_TOKEN, GROVE_WATCH_INTERVAL_MS: '500' } });
});

afterAll(async () => {
  await s?.stop();
  await forge?.close();
  cleanup(path.join(home, 'grove'));
  fs.rmSync(home, { recursive: true, force: true });
});

describe('git flow', () => {
  it('project from a file:// URL → fork → sandbox edits → checkpoint → diff → publish → merged → cleaned up; the token stays in the server', async () => {
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
    const env = dockerExec(container, ['sh', '-c', 'cat /proc/*/environ 2>/dev/null | tr "\\0" "\\n"']);
    expect(env.out).not.toContain(FORGE_TOKEN);

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
});
