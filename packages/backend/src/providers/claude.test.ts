// The claude provider through the real backend, with a stand-in CLI (test-fixtures/fake-claude.mjs)
// that prints the stream-json shapes of Claude Code 2.1.x. The real binary runs in packages/core's
// agent tests, inside a real sandbox.
import { existsSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { PLACEHOLDER_API_KEY, agentConfigSchema, postMessageResponseSchema, threadResponseSchema } from '@grove/contracts';
import type { ThreadLine } from '@grove/contracts';
import { StreamClient, http, makeDirs, postMessage, startBackend } from '../test-support.ts';
import type { TestBackend } from '../test-support.ts';
import { SESSION_FILE } from './session-file.ts';
import { claudeEnv, toLines, toolOutput, MAX_TOOL_OUTPUT_CHARS } from './claude.ts';

const FAKE = fileURLToPath(new URL('./test-fixtures/fake-claude.mjs', import.meta.url));

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

interface Harness {
  t: TestBackend;
  client: StreamClient;
  log: string;
  state: string;
  invocations(): Array<{ args: string[]; env: Record<string, string | undefined>; cwd: string }>;
}

async function start(opts: { root?: string; env?: Record<string, string>; model?: string } = {}): Promise<Harness> {
  const dirs = opts.root ? { root: opts.root } : await makeDirs();
  const root = dirs.root;
  const log = join(root, 'claude-args.jsonl');
  const state = join(root, 'claude-sessions');
  const t = await startBackend({
    root,
    provider: 'claude',
    agent: agentConfigSchema.parse({ provider: 'claude', ...(opts.model ? { model: opts.model } : {}), env: { FAKE_EXTRA: 'from-config' } }),
    agentEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin', FAKE_CLAUDE_LOG: log, FAKE_CLAUDE_STATE: state, ...opts.env },
    relayUrl: 'http://127.0.0.1:3129',
    claudeBinary: FAKE,
    cancelGraceMs: 300,
  });
  const client = await StreamClient.connect(t.socketPath);
  cleanups.push(async () => {
    client.close();
    await t.backend.close();
  });
  if (!opts.root) cleanups.push(() => rm(root, { recursive: true, force: true }));
  return {
    t,
    client,
    log,
    state,
    invocations: () =>
      existsSync(log)
        ? readFileSync(log, 'utf8')
            .split('\n')
            .filter(Boolean)
            .map((l) => JSON.parse(l) as { args: string[]; env: Record<string, string | undefined>; cwd: string })
        : [],
  };
}

async function runTurn(h: Harness, text: string): Promise<{ turn: string; lines: ThreadLine[] }> {
  const res = await postMessage(h.t.socketPath, text);
  expect(res.status, res.text).toBe(202);
  const { turn } = postMessageResponseSchema.parse(res.json);
  await h.client.waitForTurnEnd(turn);
  const thread = threadResponseSchema.parse((await http(h.t.socketPath, { path: '/thread' })).json).lines;
  return { turn, lines: thread.filter((l) => l.turn === turn) };
}

const kinds = (lines: ThreadLine[]) => lines.map((l) => (l.kind === 'raw' ? `raw:${String((l.event as { type?: unknown }).type)}` : l.kind));

describe('claude provider', () => {
  it('maps a turn with a tool call to typed lines, streams text deltas, and really edits the workspace', async () => {
    const h = await start({ model: 'sonnet' });
    const { turn, lines } = await runTurn(h, 'write notes.txt hello from claude');
    expect(kinds(lines)).toEqual(['user', 'raw:system', 'assistant', 'tool_call', 'tool_result', 'assistant', 'raw:result', 'turn_end']);
    expect(lines.find((l) => l.kind === 'tool_call')).toMatchObject({ callId: 'toolu_1', tool: 'Write', input: { content: 'hello from claude' } });
    expect(lines.find((l) => l.kind === 'tool_result')).toMatchObject({ callId: 'toolu_1', isError: false });
    expect(lines.at(-1)).toMatchObject({ kind: 'turn_end', status: 'completed' });
    const result = lines.find((l) => l.kind === 'raw' && (l.event as { type?: string }).type === 'result');
    expect(result).toMatchObject({ provider: 'claude', event: { total_cost_usd: 0.0012, usage: { input_tokens: 10 } } });
    expect(readFileSync(join(h.t.workspaceDir, 'notes.txt'), 'utf8')).toBe('hello from claude');
    const deltas = h.client.frames.flatMap((f) => (f.type === 'delta' && f.turn === turn ? [f.text] : []));
    expect(deltas).toEqual(['Writing ', 'it.']);

    const [call] = h.invocations();
    expect(call?.args.slice(0, 9)).toEqual(['-p', '--output-format', 'stream-json', '--verbose', '--include-partial-messages', '--permission-mode', 'bypassPermissions', '--model', 'sonnet']);
    expect(call?.args.slice(-2)).toEqual(['--', 'write notes.txt hello from claude']);
    expect(call?.args).not.toContain('--resume');
    expect(call?.cwd).toBe(h.t.workspaceDir);
    expect(call?.env).toMatchObject({ ANTHROPIC_BASE_URL: 'http://127.0.0.1:3129', ANTHROPIC_API_KEY: PLACEHOLDER_API_KEY, EXTRA: 'from-config' });
    expect(call?.env.NO_PROXY).toContain('127.0.0.1');
    expect(call?.env.GROVE_SLUG).toBeUndefined();
  });

  it('resumes the session of the first turn on every later turn, and after a backend restart', async () => {
    const h = await start();
    const first = await runTurn(h, 'hello');
    const init = first.lines.find((l) => l.kind === 'raw' && (l.event as { subtype?: string }).subtype === 'init');
    const sessionId = (init?.kind === 'raw' ? (init.event as { session_id: string }).session_id : '') ?? '';
    expect(sessionId).toMatch(/^[0-9a-f-]{36}$/);
    const status = await http(h.t.socketPath, { path: '/status' });
    expect(status.json).toMatchObject({ provider: 'claude', agentSessionId: sessionId });
    expect(JSON.parse(readFileSync(join(h.t.threadDir, SESSION_FILE), 'utf8'))).toMatchObject({ provider: 'claude', sessionId });

    await runTurn(h, 'again');
    expect(h.invocations()[1]?.args).toEqual(expect.arrayContaining(['--resume', sessionId]));

    // A new backend on the same thread dir (a container restart) resumes the same session.
    h.client.close();
    await h.t.backend.close();
    const again = await start({ root: h.t.root });
    await runTurn(again, 'after restart');
    expect(again.invocations().at(-1)?.args).toEqual(expect.arrayContaining(['--resume', sessionId]));
    expect((await http(again.t.socketPath, { path: '/status' })).json).toMatchObject({ agentSessionId: sessionId });
  });

  it('starts a new session, and says so, when the stored one is gone', async () => {
    const h = await start();
    await runTurn(h, 'hello');
    const old = JSON.parse(readFileSync(join(h.t.threadDir, SESSION_FILE), 'utf8')) as { sessionId: string };
    await rm(h.state, { recursive: true, force: true });
    const { lines } = await runTurn(h, 'still there?');
    // The failed --resume attempt's own result is kept too: nothing the CLI prints is dropped.
    expect(kinds(lines)).toEqual(['user', 'raw:result', 'raw:grove.session_lost', 'raw:system', 'assistant', 'raw:result', 'turn_end']);
    expect(lines.at(-1)).toMatchObject({ status: 'completed' });
    const now = (await http(h.t.socketPath, { path: '/status' })).json as { agentSessionId: string };
    expect(now.agentSessionId).not.toBe(old.sessionId);
  });

  it('cancels mid-stream with SIGINT: turn_end cancelled, the CLI ends cleanly, the next turn resumes the session', async () => {
    const h = await start();
    const res = await postMessage(h.t.socketPath, 'slow');
    const { turn: slow } = postMessageResponseSchema.parse(res.json);
    await h.client.waitFor((f) => f.type === 'delta' && f.turn === slow);
    expect((await http(h.t.socketPath, { method: 'POST', path: '/turn/cancel' })).status).toBe(202);
    const end = await h.client.waitForTurnEnd(slow);
    expect(end).toMatchObject({ line: { status: 'cancelled' } });
    const lines = threadResponseSchema.parse((await http(h.t.socketPath, { path: '/thread' })).json).lines.filter((l) => l.turn === slow);
    // What the CLI printed on its way out (the interruption notice, its result) is kept; no error line.
    expect(kinds(lines)).toEqual(['user', 'raw:system', 'assistant', 'raw:user', 'raw:result', 'turn_end']);
    const sessionId = (await http(h.t.socketPath, { path: '/status' })).json as { agentSessionId: string };
    const next = await runTurn(h, 'hello');
    expect(next.lines.at(-1)).toMatchObject({ status: 'completed' });
    expect(h.invocations().at(-1)?.args).toEqual(expect.arrayContaining(['--resume', sessionId.agentSessionId]));
  });

  it('kills a CLI that ignores SIGINT after the grace period', async () => {
    const h = await start();
    const { turn: t } = postMessageResponseSchema.parse((await postMessage(h.t.socketPath, 'stubborn')).json);
    await h.client.waitFor((f) => f.type === 'delta' && f.turn === t);
    const t0 = Date.now();
    await http(h.t.socketPath, { method: 'POST', path: '/turn/cancel' });
    expect(await h.client.waitForTurnEnd(t)).toMatchObject({ line: { status: 'cancelled' } });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
  });

  it('ends the turn with an error line when the CLI crashes, and the next turn works', async () => {
    const h = await start();
    const crash = await runTurn(h, 'crash');
    expect(kinds(crash.lines)).toEqual(['user', 'raw:system', 'error', 'turn_end']);
    expect(crash.lines.find((l) => l.kind === 'error')).toMatchObject({ message: expect.stringMatching(/claude exited with code 3 before it finished the turn: fake claude: something broke/) });
    expect(crash.lines.at(-1)).toMatchObject({ status: 'failed' });
    expect((await runTurn(h, 'hello')).lines.at(-1)).toMatchObject({ status: 'completed' });
  });

  it('fails the turn on an error result, with the reason', async () => {
    const h = await start();
    const { lines } = await runTurn(h, 'error result');
    expect(lines.find((l) => l.kind === 'error')).toMatchObject({ message: expect.stringContaining('hit the turn limit') });
    expect(lines.at(-1)).toMatchObject({ status: 'failed' });
  });

  it('keeps what it does not model verbatim: non-JSON output, unknown events, thinking blocks', async () => {
    const h = await start();
    const { lines } = await runTurn(h, 'odd');
    expect(kinds(lines)).toEqual(['user', 'raw:system', 'raw:stdout', 'raw:brand_new_event', 'assistant', 'raw:assistant', 'raw:result', 'turn_end']);
    expect(lines[2]).toMatchObject({ event: { type: 'stdout', text: 'this is not json' } });
    expect(lines[3]).toMatchObject({ event: { type: 'brand_new_event', detail: 42 } });
    expect(lines[5]).toMatchObject({ event: { message: { content: [{ type: 'thinking', thinking: 'hmm' }] } } });
  });

  it('passes a message that looks like an option as the prompt, and a huge one on stdin', async () => {
    const h = await start();
    await runTurn(h, '--help me');
    expect(h.invocations()[0]?.args.slice(-2)).toEqual(['--', '--help me']);
    // 60 000 characters, 120 000 bytes: over what one argv string may hold, under the message limit.
    const big = 'é'.repeat(60_000);
    const res = await postMessage(h.t.socketPath, big);
    expect(res.status).toBe(202);
    await h.client.waitForTurnEnd('turn-2');
    expect(h.invocations()[1]?.args).not.toContain('--');
  });

  it('reports a missing CLI as an error line, not a crash', async () => {
    const root = (await makeDirs()).root;
    cleanups.push(() => rm(root, { recursive: true, force: true }));
    const t = await startBackend({ root, provider: 'claude', claudeBinary: join(root, 'no-such-claude') });
    cleanups.push(() => t.backend.close());
    const client = await StreamClient.connect(t.socketPath);
    cleanups.push(async () => client.close());
    await postMessage(t.socketPath, 'hi');
    await client.waitForTurnEnd('turn-1');
    const lines = threadResponseSchema.parse((await http(t.socketPath, { path: '/thread' })).json).lines;
    expect(lines.find((l) => l.kind === 'error')).toMatchObject({ message: expect.stringContaining('is not installed in this sandbox image') });
  });
});

describe('claude stream-json mapping', () => {
  it('turns tool results with text blocks into text, and caps huge outputs', () => {
    expect(toolOutput([{ type: 'text', text: 'a' }, { type: 'image' }, { type: 'text', text: 'b' }])).toBe('a\n[image]\nb');
    expect(toolOutput(undefined)).toBe('');
    const capped = toolOutput('y'.repeat(MAX_TOOL_OUTPUT_CHARS + 5));
    expect(capped).toContain('5 more characters not kept');
  });

  it('keeps an assistant event with only unknown blocks whole', () => {
    const event = { type: 'assistant', message: { id: 'm', content: [{ type: 'server_tool_use', id: 'x' }] }, session_id: 's' };
    expect(toLines(event)).toEqual([{ kind: 'raw', provider: 'claude', event }]);
  });

  it('never lets the config override the relay or the placeholder key, and keeps loopback off the proxy', () => {
    const env = claudeEnv({
      baseEnv: { NO_PROXY: 'example.com', ANTHROPIC_AUTH_TOKEN: 'x' },
      config: { provider: 'claude', permissionMode: 'bypassPermissions', env: {} },
      baseUrl: 'http://127.0.0.1:3129',
    });
    expect(env).toMatchObject({ ANTHROPIC_BASE_URL: 'http://127.0.0.1:3129', ANTHROPIC_API_KEY: PLACEHOLDER_API_KEY, NO_PROXY: 'example.com,127.0.0.1,localhost' });
    expect(env.ANTHROPIC_AUTH_TOKEN).toBeUndefined();
  });
});
