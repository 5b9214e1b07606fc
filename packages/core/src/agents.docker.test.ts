// Real agents in real sandboxes: the Claude Code binary from the image, inside a hardened container with
// no network, talking to a local fake of the Anthropic Messages API (127.0.0.1 on the host) only through
// the credential relay (127.0.0.1:3129 in the sandbox -> provider.sock -> the host adds the key). Also the
// command provider with a script agent, allowed-paths reverts and undo - all through createGrove.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PLACEHOLDER_API_KEY, streamFrameSchema, threadResponseSchema } from '@grove/contracts';
import type { ProjectConfigInput, StreamFrame, ThreadLine } from '@grove/contracts';
import { createDockerDriver, LABELS } from '@grove/sandbox';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { createTestGrove } from './test-support/test-grove.ts';
import type { Grove } from './index.ts';
import { startFakeAnthropic } from '../../egress/src/test-support/fake-anthropic.ts';
import type { FakeAnthropic } from '../../egress/src/test-support/fake-anthropic.ts';
import { git, makeSourceRepo } from './test-support/repo.ts';

const IMAGE = process.env.GROVE_SANDBOX_IMAGE ?? 'grove-sandbox:latest';
const INSTANCE = `agents-${randomBytes(4).toString('hex')}`;
const API_KEY = `sk-ant-test-${randomBytes(12).toString('hex')}`;

let tmp: string;
let source: string;
let fake: FakeAnthropic;
const groves: Grove[] = [];

beforeAll(async () => {
  execFileSync('docker', ['image', 'inspect', IMAGE], { stdio: 'ignore' });
  tmp = mkdtempSync(join(tmpdir(), 'grove-agents-'));
  source = makeSourceRepo(join(tmp, 'src'));
  fake = await startFakeAnthropic();
});
afterAll(async () => {
  for (const g of groves.splice(0)) await g.close();
  const ids = execFileSync('docker', ['ps', '-aq', '--filter', `label=${LABELS.instance}=${INSTANCE}`], { encoding: 'utf8' }).trim();
  if (ids) execFileSync('docker', ['rm', '-f', ...ids.split('\n')], { stdio: 'ignore' });
  await fake?.close();
  rmSync(tmp, { recursive: true, force: true });
});

async function groveWith(project: string, config: ProjectConfigInput): Promise<{ grove: Grove; home: string }> {
  const home = mkdtempSync(join(tmp, 'home-'));
  const grove = await createTestGrove({
    home,
    driver: createDockerDriver({ instance: INSTANCE }),
    image: IMAGE,
    maxRunning: 4,
    logger: pino({ level: process.env.GROVE_TEST_LOG ?? 'silent' }),
    providerRelay: { upstream: fake.url, apiKey: API_KEY },
  });
  groves.push(grove);
  await grove.addProject({ name: project, source, createDefault: false, config });
  return { grove, home };
}

function http(socketPath: string, opts: { method?: string; path: string; body?: unknown }): Promise<{ status: number; json: unknown }> {
  return new Promise((resolve, reject) => {
    const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const req = request({ socketPath, path: opts.path, method: opts.method ?? 'GET', agent: false, headers: body ? { 'content-type': 'application/json' } : {} }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: text ? (JSON.parse(text) as unknown) : null }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A /stream client that keeps every frame. */
async function stream(socketPath: string): Promise<{ frames: StreamFrame[]; until(pred: (f: StreamFrame) => boolean, ms?: number): Promise<StreamFrame>; close(): void }> {
  const ws = new WebSocket(`ws+unix://${socketPath}:/stream`);
  const frames: StreamFrame[] = [];
  const waiters: Array<{ pred: (f: StreamFrame) => boolean; resolve: (f: StreamFrame) => void }> = [];
  ws.on('message', (data: Buffer) => {
    const f = streamFrameSchema.parse(JSON.parse(data.toString('utf8')));
    frames.push(f);
    for (const w of [...waiters]) {
      if (!w.pred(f)) continue;
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(f);
    }
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return {
    frames,
    until(pred, ms = 90_000) {
      const seen = frames.find(pred);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`no matching frame in ${ms} ms; last: ${JSON.stringify(frames.slice(-5))}`)), ms);
        waiters.push({ pred, resolve: (f) => (clearTimeout(t), resolve(f)) });
      });
    },
    close: () => ws.close(),
  };
}

async function turn(socket: string, s: Awaited<ReturnType<typeof stream>>, text: string): Promise<{ turn: string; lines: ThreadLine[] }> {
  const posted = await http(socket, { method: 'POST', path: '/messages', body: { text } });
  expect(posted.status, JSON.stringify(posted.json)).toBe(202);
  const id = (posted.json as { turn: string }).turn;
  await s.until((f) => f.type === 'line' && f.line.kind === 'turn_end' && f.line.turn === id);
  return { turn: id, lines: await linesOf(socket, id) };
}

async function linesOf(socket: string, turnId: string): Promise<ThreadLine[]> {
  const thread = threadResponseSchema.parse((await http(socket, { path: '/thread' })).json);
  return thread.lines.filter((l) => l.turn === turnId);
}

function containerOf(slug: string): string {
  const id = execFileSync('docker', ['ps', '-q', '--filter', `label=${LABELS.instance}=${INSTANCE}`, '--filter', `label=${LABELS.slug}=${slug}`], { encoding: 'utf8' }).trim();
  if (!id) throw new Error(`no running container for ${slug}`);
  return id;
}

function exec(container: string, script: string): string {
  return execFileSync('docker', ['exec', '-u', '1000:1000', container, 'sh', '-c', script], { encoding: 'utf8' });
}

const grove = (l: ThreadLine) => (l.kind === 'raw' && l.provider === 'grove' ? (l.event as { type: string }) : null);

describe('claude in a real sandbox', () => {
  it('streams, edits the worktree through a tool call, resumes the session, keeps the key outside, cancels mid-stream, undoes', { timeout: 300_000 }, async () => {
    const { grove: g, home } = await groveWith('cc', { agent: { provider: 'claude' }, allowedPaths: ['hello.txt', 'src/**'] });
    await g.fork({ project: 'cc', name: 'one' });
    const socket = await g.socketFor('cc~one');
    const worktree = join(home, 'worktrees', 'cc', 'one');
    const s = await stream(socket);
    try {
      // Turn 1: text streams as deltas, a Write tool call edits the worktree, the file outside the allowed paths is reverted.
      const t1 = await turn(socket, s, 'write hello.txt hi from claude; write secret/notes.txt not allowed');
      const kinds = t1.lines.map((l) => l.kind);
      expect(t1.lines.at(-1), JSON.stringify(t1.lines.filter((l) => l.kind === 'error'))).toMatchObject({ kind: 'turn_end', status: 'completed' });
      expect(kinds).toEqual(expect.arrayContaining(['user', 'assistant', 'tool_call', 'tool_result']));
      expect(t1.lines.filter((l) => l.kind === 'tool_call')).toEqual([
        expect.objectContaining({ tool: 'Write', input: { file_path: '/workspace/hello.txt', content: 'hi from claude' } }),
        expect.objectContaining({ tool: 'Write', input: { file_path: '/workspace/secret/notes.txt', content: 'not allowed' } }),
      ]);
      expect(t1.lines.filter((l) => l.kind === 'tool_result').every((l) => l.kind === 'tool_result' && !l.isError)).toBe(true);
      expect(t1.lines.filter((l) => l.kind === 'assistant').map((l) => (l.kind === 'assistant' ? l.text : ''))).toEqual(['Writing now.', 'All done.']);
      const deltas = s.frames.flatMap((f) => (f.type === 'delta' && f.turn === t1.turn ? [f.text] : []));
      expect(deltas.join('')).toBe('Writing now.All done.');
      const result = t1.lines.find((l) => l.kind === 'raw' && (l.event as { type?: string }).type === 'result');
      expect(result).toMatchObject({ provider: 'claude', event: { is_error: false, usage: expect.any(Object), total_cost_usd: expect.any(Number) } });
      expect(readFileSync(join(worktree, 'hello.txt'), 'utf8')).toBe('hi from claude');
      expect(existsSync(join(worktree, 'secret'))).toBe(false);
      expect(t1.lines.map(grove).filter(Boolean)).toEqual([
        { type: 'paths_reverted', allowedPaths: ['hello.txt', 'src/**'], paths: [{ path: 'secret/notes.txt', action: 'removed' }] },
        expect.objectContaining({ type: 'snapshot', ref: 'refs/grove/cc+one/turns/1', files: ['hello.txt'] }),
      ]);
      const init = t1.lines.find((l) => l.kind === 'raw' && (l.event as { subtype?: string }).subtype === 'init');
      const sessionId = (init?.kind === 'raw' ? (init.event as { session_id?: string }).session_id : undefined) ?? '';
      expect(sessionId).toMatch(/^[0-9a-f-]{36}$/);
      expect((await http(socket, { path: '/status' })).json).toMatchObject({ provider: 'claude', agentSessionId: sessionId });

      // The relay: every API call reached the fake upstream with the host's key, none with the placeholder.
      const turnOneCalls = fake.requests.filter((r) => r.url.startsWith('/v1/messages'));
      expect(turnOneCalls.length).toBeGreaterThanOrEqual(2);
      for (const r of turnOneCalls) expect(r.headers['x-api-key']).toBe(API_KEY);
      expect(turnOneCalls[0]?.url).toBe('/v1/messages?beta=true');

      // Turn 2 edits the file and resumes the same conversation: the API sees turn 1's messages again.
      const before = fake.requests.length;
      const t2 = await turn(socket, s, 'write hello.txt second version');
      expect(t2.lines.at(-1)).toMatchObject({ status: 'completed' });
      const t2init = t2.lines.find((l) => l.kind === 'raw' && (l.event as { subtype?: string }).subtype === 'init');
      expect(t2init).toMatchObject({ event: { session_id: sessionId } });
      const firstOfTurn2 = fake.requests.slice(before).find((r) => r.url.startsWith('/v1/messages'));
      expect(firstOfTurn2?.headers['x-claude-code-session-id']).toBe(sessionId);
      expect(JSON.stringify(firstOfTurn2?.body?.messages)).toContain('hi from claude');
      expect(readFileSync(join(worktree, 'hello.txt'), 'utf8')).toBe('second version');

      // Turn 3 streams until cancelled; meanwhile the CLI's command line shows --resume <session id>,
      // and the key is nowhere in the sandbox: not in any process environment, not in any file.
      const posted = await http(socket, { method: 'POST', path: '/messages', body: { text: 'slow' } });
      const t3 = (posted.json as { turn: string }).turn;
      await s.until((f) => f.type === 'delta' && f.turn === t3 && f.text.startsWith('tick'));
      const container = containerOf('cc~one');
      const cmdlines = exec(container, 'for p in /proc/[0-9]*; do tr "\\0" " " < $p/cmdline 2>/dev/null; echo; done');
      expect(cmdlines).toContain(`--resume ${sessionId}`);
      expect(cmdlines).toMatch(/claude -p --output-format stream-json --verbose/);
      const environs = exec(container, 'cat /proc/[0-9]*/environ 2>/dev/null | tr "\\0" "\\n"');
      expect(environs).toContain(`ANTHROPIC_API_KEY=${PLACEHOLDER_API_KEY}`);
      expect(environs).toContain('ANTHROPIC_BASE_URL=http://127.0.0.1:3129');
      expect(environs).not.toContain(API_KEY);
      // grep exits 1 when nothing matches; the listing of matching files is what counts.
      const grep = exec(container, `grep -rlsF '${API_KEY}' /home /workspace /run/grove /var/lib/grove /tmp /opt /etc /usr/local/bin; true`).trim();
      expect(grep).toBe('');
      const gone = fake.clientGone();
      expect((await http(socket, { method: 'POST', path: '/turn/cancel' })).status).toBe(202);
      await s.until((f) => f.type === 'line' && f.line.kind === 'turn_end' && f.line.turn === t3);
      await gone; // the relay cut the upstream stream too
      const t3lines = await linesOf(socket, t3);
      expect(t3lines.at(-1)).toMatchObject({ kind: 'turn_end', status: 'cancelled' });
      expect(t3lines.some((l) => l.kind === 'error')).toBe(false);

      // After the cancel the next turn resumes the same session.
      const t4 = await turn(socket, s, 'are you still there?');
      expect(t4.lines.at(-1)).toMatchObject({ status: 'completed' });
      expect(t4.lines.find((l) => l.kind === 'raw' && (l.event as { subtype?: string }).subtype === 'init')).toMatchObject({ event: { session_id: sessionId } });
      expect(t4.lines.find((l) => l.kind === 'assistant')).toMatchObject({ text: 'Hello from the fake model.' });

      // Undo goes back one changing turn at a time: first to turn 1's file, then to before it.
      const u1 = await g.undo('cc~one');
      expect(u1).toMatchObject({ undone: { turn: 'turn-2', files: ['hello.txt'] }, remaining: 1 });
      expect(readFileSync(join(worktree, 'hello.txt'), 'utf8')).toBe('hi from claude');
      const u2 = await g.undo('cc~one');
      expect(u2).toMatchObject({ undone: { turn: 'turn-1' }, remaining: 0 });
      expect(existsSync(join(worktree, 'hello.txt'))).toBe(false);
      await expect(g.undo('cc~one')).rejects.toMatchObject({ code: 'invalid_state' });
      const marks = threadResponseSchema.parse((await http(socket, { path: '/thread' })).json).lines.map(grove).filter((e) => e?.type === 'undo');
      expect(marks).toEqual([expect.objectContaining({ undoneTurn: 'turn-2' }), expect.objectContaining({ undoneTurn: 'turn-1' })]);
      // The sandbox's own view: its index agrees with the branch after every checkpoint and undo.
      expect(exec(containerOf('cc~one'), 'cd /workspace && git status --porcelain').trim()).toBe('');
      // Checkpoints after turns (the default): the branch holds each changing turn and each undo, and ends
      // where it started, tree for tree; nothing was rewritten.
      const repo = join(home, 'repos', 'cc');
      expect(git(repo, 'log', '-4', '--format=%s', 'grove/one').split('\n')).toEqual([
        'Undo: write hello.txt hi from claude; write secret/notes.txt not allowed',
        'Undo: write hello.txt second version',
        'write hello.txt second version',
        'write hello.txt hi from claude; write secret/notes.txt not allowed',
      ]);
      expect(git(repo, 'rev-parse', 'grove/one^{tree}')).toBe(git(repo, 'rev-parse', 'grove/one~4^{tree}'));
      expect(git(repo, 'show', 'grove/one~3:hello.txt')).toBe('hi from claude');

      // Stop records the session in the registry; a new container resumes it.
      const stopped = await g.stop('cc~one');
      expect(stopped.agentSessionId).toBe(sessionId);
    } finally {
      s.close();
    }
    await g.start('cc~one');
    const socket2 = await g.socketFor('cc~one');
    const s2 = await stream(socket2);
    try {
      const t5 = await turn(socket2, s2, 'hello again');
      expect(t5.lines.find((l) => l.kind === 'raw' && (l.event as { subtype?: string }).subtype === 'init')).toMatchObject({ event: { session_id: (await g.get('cc~one')).agentSessionId } });
    } finally {
      s2.close();
    }
  });
});

describe('command agent in a real sandbox', () => {
  it('runs the configured CLI with the message, streams its output, reverts outside the allowed paths, undoes twice', { timeout: 180_000 }, async () => {
    const script = 'echo "agent: $1"; n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; echo "$1" > "notes-$n.txt"; echo leaked > outside.txt; [ "$1" != fail ] || exit 4';
    const { grove: g, home } = await groveWith('cmd', {
      agent: { provider: 'command', argv: ['sh', '-c', script, 'agent', '{message}'], env: { GREETING: 'hi' } },
      allowedPaths: ['notes-*.txt', 'count'],
    });
    await g.fork({ project: 'cmd', name: 'one' });
    const socket = await g.socketFor('cmd~one');
    const worktree = join(home, 'worktrees', 'cmd', 'one');
    const s = await stream(socket);
    try {
      expect((await http(socket, { path: '/health' })).json).toMatchObject({ provider: 'command' });
      const t1 = await turn(socket, s, 'first note');
      expect(t1.lines.find((l) => l.kind === 'assistant')).toMatchObject({ text: 'agent: first note\n' });
      expect(s.frames.some((f) => f.type === 'delta' && f.turn === t1.turn && f.text.includes('agent: first note'))).toBe(true);
      expect(t1.lines.map(grove).filter(Boolean)[0]).toEqual({ type: 'paths_reverted', allowedPaths: ['notes-*.txt', 'count'], paths: [{ path: 'outside.txt', action: 'removed' }] });
      expect(existsSync(join(worktree, 'outside.txt'))).toBe(false);
      const t2 = await turn(socket, s, 'fail');
      expect(t2.lines.find((l) => l.kind === 'error')).toMatchObject({ message: expect.stringContaining('sh exited with code 4') });
      expect(t2.lines.at(-1)).toMatchObject({ status: 'failed' });
      expect(readFileSync(join(worktree, 'notes-2.txt'), 'utf8')).toBe('fail\n');

      expect(await g.undo('cmd~one')).toMatchObject({ undone: { turn: 'turn-2' }, remaining: 1 });
      expect(existsSync(join(worktree, 'notes-2.txt'))).toBe(false);
      expect(readFileSync(join(worktree, 'count'), 'utf8')).toBe('1\n');
      expect(await g.undo('cmd~one')).toMatchObject({ undone: { turn: 'turn-1' }, remaining: 0 });
      expect(existsSync(join(worktree, 'notes-1.txt'))).toBe(false);
      expect(existsSync(join(worktree, 'count'))).toBe(false);
      // Restored files belong to the sandbox user, which can write them again.
      const t3 = await turn(socket, s, 'third');
      expect(t3.lines.at(-1)).toMatchObject({ status: 'completed' });
      expect(readFileSync(join(worktree, 'notes-1.txt'), 'utf8')).toBe('third\n');
      const events = (await g.events({ slug: 'cmd~one', limit: 100 })).map((e) => e.type);
      expect(events.filter((t) => t === 'turn.reverted').length).toBe(3);
      expect(events.filter((t) => t === 'workspace.undo').length).toBe(2);
    } finally {
      s.close();
    }
  });

  it('refuses an unknown provider when the project is added, not at the first turn', async () => {
    const home = mkdtempSync(join(tmp, 'home-'));
    const g = await createTestGrove({ home, driver: createDockerDriver({ instance: INSTANCE }), image: IMAGE, maxRunning: 1, logger: pino({ level: 'silent' }) });
    groves.push(g);
    await expect(g.addProject({ name: 'bad', source, createDefault: false, config: { agent: { provider: 'codex' } } as unknown as ProjectConfigInput })).rejects.toMatchObject({
      code: 'invalid_input',
      message: expect.stringContaining('unknown agent provider'),
    });
  });
});
