// Real agents through the real server: the project config API picks Claude Code for new workspaces, the
// server's ANTHROPIC_API_KEY reaches a local fake Messages API only through the credential relay, the
// allowed paths hold after every turn, and POST /api/workspaces/:slug/undo walks the turns back.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { GroveEvent, ThreadLine, Workspace } from '@grove/contracts';
import { startFakeAnthropic } from '../packages/egress/src/test-support/fake-anthropic.ts';
import { TOKEN, containerOf, openStream, useServer } from './harness.ts';
import { findSecretsInSandbox } from './support/secrets.ts';

const KEY = `sk-ant-SENTINEL-${randomBytes(12).toString('hex')}`;
// Not used by this test's flow: planted so the sandbox scan below can show it never gets in.
const FORGE_TOKEN = `grove-forge-SENTINEL-${randomBytes(12).toString('hex')}`;
const fake = await startFakeAnthropic();
afterAll(() => fake.close());
const fx = useServer('agents', { ANTHROPIC_API_KEY: KEY, GROVE_ANTHROPIC_UPSTREAM: fake.url, GROVE_FORGE_TOKEN: FORGE_TOKEN });

describe('agents through the server', () => {
  it('claude per project config, key only upstream, allowed paths enforced, undo twice over the API', { timeout: 240_000 }, async () => {
    const config = await fx.s.api('PUT', '/api/projects/demo/config', { agent: { provider: 'claude' }, allowedPaths: ['notes/**'] });
    expect(config.status).toBe(200);
    const fork = await fx.s.api<{ workspace: Workspace }>('POST', '/api/workspaces', { project: 'demo', name: 'cc' });
    expect(fork.status, JSON.stringify(fork.body)).toBe(201);
    const slug = fork.body.workspace.slug;
    const worktree = path.join(fx.home, 'worktrees', 'demo', 'cc');
    const stream = openStream(fx.s, slug);
    await stream.ready;
    const turn = async (text: string): Promise<ThreadLine[]> => {
      const sent = await fx.s.api<{ turn: string }>('POST', `/w/${slug}/messages`, { text });
      expect(sent.status).toBe(202);
      await stream.until((f) => f.type === 'line' && f.line.kind === 'turn_end' && f.line.turn === sent.body.turn, 120_000);
      const lines = (await fx.s.api<{ lines: ThreadLine[] }>('GET', `/w/${slug}/thread`)).body.lines;
      return lines.filter((l) => l.turn === sent.body.turn);
    };
    try {
      const t1 = await turn('write notes/a.md first draft; write top.txt not allowed here');
      expect(t1.at(-1)).toMatchObject({ kind: 'turn_end', status: 'completed' });
      expect(t1.filter((l) => l.kind === 'tool_call').map((l) => l.kind === 'tool_call' && l.tool)).toEqual(['Write', 'Write']);
      expect(fs.readFileSync(path.join(worktree, 'notes/a.md'), 'utf8')).toBe('first draft');
      expect(fs.existsSync(path.join(worktree, 'top.txt'))).toBe(false);
      expect(t1.find((l) => l.kind === 'raw' && l.provider === 'grove')).toMatchObject({ event: { type: 'paths_reverted', paths: [{ path: 'top.txt', action: 'removed' }] } });

      const t2 = await turn('write notes/a.md second draft');
      expect(t2.at(-1)).toMatchObject({ status: 'completed' });
      expect(fs.readFileSync(path.join(worktree, 'notes/a.md'), 'utf8')).toBe('second draft');

      const u1 = await fx.s.api<{ undone: { turn: string }; remaining: number }>('POST', `/api/workspaces/${slug}/undo`);
      expect(u1.status).toBe(200);
      expect(u1.body).toMatchObject({ undone: { turn: 'turn-2' }, remaining: 1 });
      expect(fs.readFileSync(path.join(worktree, 'notes/a.md'), 'utf8')).toBe('first draft');
      const u2 = await fx.s.api<{ undone: { turn: string }; remaining: number }>('POST', `/api/workspaces/${slug}/undo`);
      expect(u2.body).toMatchObject({ undone: { turn: 'turn-1' }, remaining: 0 });
      expect(fs.existsSync(path.join(worktree, 'notes'))).toBe(false);
      const u3 = await fx.s.api<{ code: string }>('POST', `/api/workspaces/${slug}/undo`);
      expect(u3.status).toBe(409);
      expect(u3.body.code).toBe('invalid_state');

      // Mid-turn, while Claude Code runs and streams through the relay: the key, the forge token and the
      // Grove token are nowhere in the sandbox, by value (environments, process list, files).
      const slow = await fx.s.api<{ turn: string }>('POST', `/w/${slug}/messages`, { text: 'slow' });
      expect(slow.status).toBe(202);
      await stream.until((f) => f.type === 'delta' && f.turn === slow.body.turn && f.text.startsWith('tick'), 120_000);
      const container = containerOf(fx.s.instance, slug) ?? '';
      expect(execFileSync('docker', ['top', container, '-eo', 'pid,args'], { encoding: 'utf8' })).toMatch(/claude -p /); // the scan runs mid-turn
      expect(await findSecretsInSandbox(container, { ANTHROPIC_API_KEY: KEY, GROVE_FORGE_TOKEN: FORGE_TOKEN, GROVE_TOKEN: TOKEN })).toEqual([]);
      expect((await fx.s.api('POST', `/w/${slug}/turn/cancel`)).status).toBe(202);
      await stream.until((f) => f.type === 'line' && f.line.kind === 'turn_end' && f.line.turn === slow.body.turn, 60_000);
    } finally {
      stream.close();
    }

    // The key went upstream on every call and nowhere else: not in the server's logs either.
    const calls = fake.requests.filter((r) => r.url.startsWith('/v1/messages'));
    expect(calls.length).toBeGreaterThanOrEqual(3);
    expect(calls.every((r) => r.headers['x-api-key'] === KEY)).toBe(true);
    expect(fx.s.logs.join('\n')).not.toContain(KEY);
    const events = (await fx.s.api<{ events: GroveEvent[] }>('GET', `/api/events?slug=${slug}&limit=200`)).body.events.map((e) => e.type);
    expect(events).toEqual(expect.arrayContaining(['turn.reverted', 'turn.snapshot', 'workspace.undo']));
    expect(events.filter((t) => t === 'workspace.undo')).toHaveLength(2);
  });
});
