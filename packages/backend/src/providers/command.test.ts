// The command provider through the real backend, with small shell-script agents.
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { agentConfigSchema, postMessageResponseSchema, threadResponseSchema } from '@grove/contracts';
import type { AgentConfigInput, ThreadLine } from '@grove/contracts';
import { StreamClient, http, postMessage, startBackend } from '../test-support.ts';
import type { TestBackend } from '../test-support.ts';
import { commandArgv } from './command.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

async function start(agent: Omit<Extract<AgentConfigInput, { provider: 'command' }>, 'provider'>): Promise<{ t: TestBackend; client: StreamClient }> {
  const t = await startBackend({
    provider: 'command',
    agent: agentConfigSchema.parse({ provider: 'command', ...agent }),
    agentEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin', INHERITED: 'yes' },
    relayUrl: 'http://127.0.0.1:3129',
    cancelGraceMs: 500,
  });
  cleanups.push(t.dispose);
  const client = await StreamClient.connect(t.socketPath);
  cleanups.push(async () => client.close());
  return { t, client };
}

async function runTurn(h: { t: TestBackend; client: StreamClient }, text: string): Promise<{ turn: string; lines: ThreadLine[] }> {
  const res = await postMessage(h.t.socketPath, text);
  expect(res.status, res.text).toBe(202);
  const { turn } = postMessageResponseSchema.parse(res.json);
  await h.client.waitForTurnEnd(turn);
  const lines = threadResponseSchema.parse((await http(h.t.socketPath, { path: '/thread' })).json).lines;
  return { turn, lines: lines.filter((l) => l.turn === turn) };
}

describe('command provider', () => {
  it('runs the argv template in the workspace with the message as an argument, streaming stdout, keeping stderr', async () => {
    const h = await start({
      argv: ['sh', '-c', 'echo "agent got: $1"; echo "env: $INHERITED $FROM_CONFIG"; echo "a warning" >&2; printf "%s" "$1" > out.txt', 'agent', '{message}'],
      env: { FROM_CONFIG: 'set' },
    });
    const { turn, lines } = await runTurn(h, 'fix it; rm -rf / "$HOME"');
    expect(lines.map((l) => l.kind)).toEqual(['user', 'assistant', 'raw', 'turn_end']);
    expect(lines[1]).toMatchObject({ kind: 'assistant', text: 'agent got: fix it; rm -rf / "$HOME"\nenv: yes set\n' });
    expect(lines[2]).toMatchObject({ kind: 'raw', provider: 'command', event: { type: 'stderr', text: 'a warning\n' } });
    expect(lines[3]).toMatchObject({ status: 'completed' });
    // The message is one argv entry, never shell-interpreted.
    expect(readFileSync(`${h.t.workspaceDir}/out.txt`, 'utf8')).toBe('fix it; rm -rf / "$HOME"');
    const streamed = h.client.frames.flatMap((f) => (f.type === 'delta' && f.turn === turn ? [f.text] : [])).join('');
    expect(streamed).toBe('agent got: fix it; rm -rf / "$HOME"\nenv: yes set\n');
  });

  it('writes the message to stdin when configured so', async () => {
    const h = await start({ argv: ['sh', '-c', 'cat > in.txt; echo stored'], input: 'stdin' });
    const { lines } = await runTurn(h, 'line one\nline two');
    expect(lines.at(-1)).toMatchObject({ status: 'completed' });
    expect(readFileSync(`${h.t.workspaceDir}/in.txt`, 'utf8')).toBe('line one\nline two');
  });

  it('fails the turn with an error line on a non-zero exit, and the next turn works', async () => {
    const h = await start({ argv: ['sh', '-c', 'echo partial; echo "it broke" >&2; [ "$1" = ok ] || exit 7', 'agent', '{message}'] });
    const bad = await runTurn(h, 'please');
    expect(bad.lines.map((l) => l.kind)).toEqual(['user', 'assistant', 'raw', 'error', 'turn_end']);
    expect(bad.lines[3]).toMatchObject({ message: 'sh exited with code 7: it broke' });
    expect(bad.lines.at(-1)).toMatchObject({ status: 'failed' });
    expect((await runTurn(h, 'ok')).lines.at(-1)).toMatchObject({ status: 'completed' });
  });

  it('cancels with SIGINT to the whole process group', async () => {
    const h = await start({
      argv: ['sh', '-c', 'trap "echo interrupted; exit 130" INT; sleep 30 & while true; do echo tick; sleep 0.05; done', 'agent', '{message}'],
    });
    const { turn } = postMessageResponseSchema.parse((await postMessage(h.t.socketPath, 'go')).json);
    await h.client.waitFor((f) => f.type === 'delta' && f.turn === turn);
    expect((await http(h.t.socketPath, { method: 'POST', path: '/turn/cancel' })).status).toBe(202);
    expect(await h.client.waitForTurnEnd(turn)).toMatchObject({ line: { status: 'cancelled' } });
    const lines = threadResponseSchema.parse((await http(h.t.socketPath, { path: '/thread' })).json).lines.filter((l) => l.turn === turn);
    expect(lines.find((l) => l.kind === 'assistant')).toMatchObject({ text: expect.stringContaining('interrupted') });
    expect(lines.some((l) => l.kind === 'error')).toBe(false);
  });

  it('stops a turn that exceeds its time limit', async () => {
    const h = await start({ argv: ['sh', '-c', 'echo started; sleep 30', 'agent', '{message}'], timeoutMs: 1000 });
    const { lines } = await runTurn(h, 'go');
    expect(lines.find((l) => l.kind === 'error')).toMatchObject({ message: 'sh took longer than 1000 ms and was stopped' });
    expect(lines.at(-1)).toMatchObject({ status: 'failed' });
  });

  it('reports a program that is not installed as an error line', async () => {
    const h = await start({ argv: ['grove-no-such-agent', '{message}'] });
    const { lines } = await runTurn(h, 'go');
    expect(lines.find((l) => l.kind === 'error')).toMatchObject({ message: expect.stringContaining('"grove-no-such-agent": it is not installed') });
    expect((await http(h.t.socketPath, { path: '/health' })).status).toBe(200);
  });

  it('fills {message} wherever it appears, literally', () => {
    const config = agentConfigSchema.parse({ provider: 'command', argv: ['aider', '--message={message}', '--yes'] });
    if (config.provider !== 'command') throw new Error('unreachable');
    expect(commandArgv(config, 'use $& and $1')).toEqual(['aider', '--message=use $& and $1', '--yes']);
  });
});

describe('agent config schema', () => {
  it.each([
    [{ provider: 'codex' }, /unknown agent provider; this Grove knows: scripted, claude, command/],
    [{ provider: 'command', argv: [] }, /argv needs at least the program/],
    [{ provider: 'command', argv: ['aider', '--yes'] }, /must contain \{message\}/],
    [{ provider: 'command', argv: ['{message}'], input: 'stdin' }, /must not be \{message\}/],
    [{ provider: 'command', argv: ['x', '{message}'], env: { OPENAI_API_KEY: 'sk-1' } }, /secrets never go into a sandbox/],
    [{ provider: 'claude', env: { GROVE_SLUG: 'x' } }, /are set by Grove/],
    [{ provider: 'claude', model: 'a b' }, /model is a model name/],
    [{ provider: 'claude', extra: 1 }, /Unrecognized key/],
  ])('refuses %j', (config, message) => {
    const r = agentConfigSchema.safeParse(config);
    expect(r.success).toBe(false);
    expect(r.error?.issues.map((i) => i.message).join('; ')).toMatch(message);
  });
});
