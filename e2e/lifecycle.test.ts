// The core journey against the real stack: fork (on the run's runtime), talk, stop, reopen, tear down; and two at once.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { GroveEvent, ThreadLine, Workspace } from '@grove/contracts';
import { TEST_RUNTIME, containerOf, dockerExec, git, openStream, useServer } from './harness.ts';

const fx = useServer('life');

async function send(slug: string, text: string) {
  return fx.s.api<{ turn: string; seq: number }>('POST', `/w/${slug}/messages`, { text });
}

async function thread(slug: string): Promise<ThreadLine[]> {
  const r = await fx.s.api<{ lines: ThreadLine[] }>('GET', `/w/${slug}/thread`);
  expect(r.status).toBe(200);
  return r.body.lines;
}

describe('workspace lifecycle', () => {
  it('forks, streams a reply through the proxy, survives stop/start and tears down keeping the branch', async () => {
    const fork = await fx.s.api<{ workspace: Workspace }>('POST', '/api/workspaces', { project: 'demo', name: 'feat-a' });
    expect(fork.status).toBe(201);
    const ws = fork.body.workspace;
    expect(ws).toMatchObject({ slug: 'demo~feat-a', state: 'running', branch: 'grove/feat-a' });
    // The server's GROVE_RUNTIME (this run's: runc, or runsc in `npm test`'s second pass) is what the engine ran it on.
    const id = containerOf(fx.s.instance, ws.slug) ?? '';
    expect(execFileSync('docker', ['inspect', '--format', '{{.HostConfig.Runtime}}', id], { encoding: 'utf8' }).trim()).toBe(TEST_RUNTIME);
    const kernel = dockerExec(id, ['dmesg']);
    if (TEST_RUNTIME === 'runsc') expect(kernel.out).toContain('Starting gVisor');
    else expect(kernel.out).not.toContain('gVisor');
    const worktree = path.join(fx.home, 'worktrees', 'demo', 'feat-a');
    expect(fs.existsSync(path.join(worktree, 'README.md'))).toBe(true);
    // The server's default disk quota (GROVE_DISK_QUOTA 4 GiB, GROVE_INODE_QUOTA 200k): the figure the card shows.
    const listed = await fx.s.api<{ workspaces: Workspace[] }>('GET', '/api/workspaces');
    const disk = listed.body.workspaces.find((w) => w.slug === ws.slug)?.disk;
    expect(disk?.totalBytes).toBeGreaterThan(3.5 * 1024 ** 3);
    expect(disk?.totalBytes).toBeLessThanOrEqual(4 * 1024 ** 3);
    expect(disk?.totalInodes).toBeGreaterThanOrEqual(200_000);
    expect(disk?.usedBytes).toBeLessThan(64 * 1024 ** 2);

    const stream = openStream(fx.s, ws.slug);
    await stream.ready;
    const sent = await send(ws.slug, 'hello grove');
    expect(sent.status).toBe(202);
    const end = await stream.until((f) => f.type === 'line' && f.line.kind === 'turn_end' && f.line.turn === sent.body.turn);
    expect(end.type === 'line' && end.line.kind === 'turn_end' && end.line.status).toBe('completed');
    const deltas = stream.frames.filter((f) => f.type === 'delta');
    expect(deltas.length).toBeGreaterThanOrEqual(2);
    const assistant = stream.frames.find((f) => f.type === 'line' && f.line.kind === 'assistant');
    const streamed = deltas.map((f) => (f.type === 'delta' ? f.text : '')).join('');
    expect(assistant?.type === 'line' && assistant.line.kind === 'assistant' && assistant.line.text).toBe(streamed);
    expect(streamed).toContain('hello grove');
    stream.close();

    const before = await thread(ws.slug);
    expect(before.map((l) => l.kind)).toEqual(['user', 'assistant', 'turn_end']);

    const stopped = await fx.s.api<{ workspace: Workspace }>('POST', `/api/workspaces/${ws.slug}/stop`);
    expect(stopped.body.workspace.state).toBe('stopped');
    const refused = await fx.s.api<{ code: string; message: string }>('GET', `/w/${ws.slug}/thread`);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('workspace_stopped');
    expect(refused.body.message).toMatch(/start/);

    const started = await fx.s.api<{ workspace: Workspace }>('POST', `/api/workspaces/${ws.slug}/start`);
    expect(started.body.workspace.state).toBe('running');
    expect(await thread(ws.slug)).toEqual(before);

    const gone = await fx.s.api<{ workspace: Workspace }>('DELETE', `/api/workspaces/${ws.slug}`);
    expect(gone.status).toBe(200);
    expect(gone.body.workspace.state).toBe('gone');
    expect(containerOf(fx.s.instance, ws.slug)).toBeUndefined();
    expect(fs.existsSync(worktree)).toBe(false);
    const repo = path.join(fx.home, 'repos', 'demo');
    expect(git(repo, 'branch', '--list', 'grove/feat-a')).toContain('grove/feat-a');
    expect(git(repo, 'worktree', 'list')).not.toContain('feat-a');
    expect((await fx.s.api('GET', `/w/${ws.slug}/thread`)).status).toBe(404);

    const ev = await fx.s.api<{ events: GroveEvent[] }>('GET', `/api/events?slug=${ws.slug}`);
    const types = ev.body.events.map((e) => e.type);
    for (const t of ['workspace.reserved', 'workspace.prepared', 'sandbox.started', 'workspace.registered', 'workspace.stopped', 'workspace.started', 'workspace.cleaned']) {
      expect(types).toContain(t);
    }
  });

  it('runs two workspaces at once, each with only its own files and thread', async () => {
    const [a, b] = await Promise.all([
      fx.s.api<{ workspace: Workspace }>('POST', '/api/workspaces', { project: 'demo', name: 'two-a' }),
      fx.s.api<{ workspace: Workspace }>('POST', '/api/workspaces', { project: 'demo', name: 'two-b' }),
    ]);
    expect([a.status, b.status]).toEqual([201, 201]);
    const sa = openStream(fx.s, 'demo~two-a');
    const sb = openStream(fx.s, 'demo~two-b');
    await Promise.all([sa.ready, sb.ready]);
    const [ta, tb] = await Promise.all([send('demo~two-a', 'write only-a.txt from A'), send('demo~two-b', 'write only-b.txt from B')]);
    await Promise.all([
      sa.until((f) => f.type === 'line' && f.line.kind === 'turn_end' && f.line.turn === ta.body.turn),
      sb.until((f) => f.type === 'line' && f.line.kind === 'turn_end' && f.line.turn === tb.body.turn),
    ]);
    sa.close();
    sb.close();
    const wa = path.join(fx.home, 'worktrees', 'demo', 'two-a');
    const wb = path.join(fx.home, 'worktrees', 'demo', 'two-b');
    expect(fs.readFileSync(path.join(wa, 'only-a.txt'), 'utf8')).toBe('from A');
    expect(fs.existsSync(path.join(wa, 'only-b.txt'))).toBe(false);
    expect(fs.readFileSync(path.join(wb, 'only-b.txt'), 'utf8')).toBe('from B');
    expect(fs.existsSync(path.join(wb, 'only-a.txt'))).toBe(false);
    const [la, lb] = await Promise.all([thread('demo~two-a'), thread('demo~two-b')]);
    expect(JSON.stringify(la)).toContain('only-a.txt');
    expect(JSON.stringify(la)).not.toContain('only-b.txt');
    expect(JSON.stringify(lb)).toContain('only-b.txt');
    expect(JSON.stringify(lb)).not.toContain('only-a.txt');
    await Promise.all([fx.s.api('DELETE', '/api/workspaces/demo~two-a'), fx.s.api('DELETE', '/api/workspaces/demo~two-b')]);
  });

  it('answers 404 for an unknown slug through the proxy and the API', async () => {
    expect((await fx.s.api('GET', '/w/demo~nobody/health')).status).toBe(404);
    expect((await fx.s.api('POST', '/api/workspaces/demo~nobody/stop')).status).toBe(404);
  });
});
