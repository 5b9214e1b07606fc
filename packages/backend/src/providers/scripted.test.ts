import { mkdtempSync, readFileSync, rmSync, symlinkSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AGENT_GUIDES, type ThreadLine } from '@grove/contracts';
import { SLEEP_CAP_MS, createScriptedProvider, parseCommand, splitIntoChunks } from './scripted.ts';
import type { ProviderLine, TurnContext } from './types.ts';
import { checkRelativePath, writeWorkspaceFile } from './workspace-files.ts';

let workspaceDir: string;
beforeEach(() => {
  workspaceDir = mkdtempSync(join(tmpdir(), 'gsp-'));
});
afterEach(() => rmSync(workspaceDir, { recursive: true, force: true }));

/** Runs one scripted turn against a recording context. */
async function run(text: string, options: { turnNumber?: number; signal?: AbortSignal; delayMs?: number } = {}) {
  const deltas: string[] = [];
  const lines: ProviderLine[] = [];
  const ctx: TurnContext = {
    turn: `turn-${options.turnNumber ?? 1}`,
    turnNumber: options.turnNumber ?? 1,
    workspaceDir,
    signal: options.signal ?? new AbortController().signal,
    emitDelta: (t) => void deltas.push(t),
    appendLine: async (line) => {
      lines.push(line);
      return { ...line, seq: lines.length, at: '', turn: 'turn-1' } as ThreadLine;
    },
  };
  const outcome = await createScriptedProvider({ delayMs: options.delayMs ?? 0 }).runTurn(text, ctx);
  return { outcome, deltas, lines };
}

describe('scripted provider', () => {
  it('echoes in at least 4 deltas whose concatenation is the assistant line, deterministically per position', async () => {
    const a = await run('hello', { turnNumber: 3 });
    const b = await run('hello', { turnNumber: 3 });
    expect(a.outcome).toEqual({ status: 'completed' });
    expect(a.deltas.length).toBeGreaterThanOrEqual(4);
    expect(a.lines).toEqual([{ kind: 'assistant', text: 'Scripted agent here. You said: "hello". (turn 3)' }]);
    expect(a.deltas.join('')).toBe('Scripted agent here. You said: "hello". (turn 3)');
    expect(b).toEqual(a);
    expect((await run('hello', { turnNumber: 4 })).lines).toEqual([{ kind: 'assistant', text: 'Scripted agent here. You said: "hello". (turn 4)' }]);
  });

  it('fail appends an error line and reports failed', async () => {
    const r = await run('  fail\n');
    expect(r.outcome).toEqual({ status: 'failed' });
    expect(r.lines).toEqual([{ kind: 'error', message: 'Scripted failure, as requested. (turn 1)' }]);
  });

  it('sleep takes about that long, streaming meanwhile', async () => {
    const started = Date.now();
    const r = await run('sleep 200');
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    expect(r.deltas.length).toBeGreaterThanOrEqual(4);
    expect(r.lines).toEqual([{ kind: 'assistant', text: r.deltas.join('') }]);
  });

  it('stops promptly when aborted', async () => {
    const controller = new AbortController();
    const pending = run('sleep 60000', { signal: controller.signal });
    controller.abort(new Error('shutting down'));
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('write reports a refused path as a tool_result error and still completes', async () => {
    const r = await run('write ../escape nope');
    expect(r.outcome).toEqual({ status: 'completed' });
    expect(r.lines.map((l) => l.kind)).toEqual(['tool_call', 'tool_result', 'assistant']);
    expect(r.lines[1]).toMatchObject({ isError: true, output: 'refusing to write "../escape": it contains ".." (no escaping the workspace)' });
  });
});

describe('parseCommand', () => {
  it.each([
    ['fail', { kind: 'fail' }],
    ['Fail', { kind: 'echo' }],
    ['sleep 10', { kind: 'sleep', ms: 10 }],
    ['sleep 999999', { kind: 'sleep', ms: SLEEP_CAP_MS }],
    ['sleep -1', { kind: 'echo' }],
    ['sleep soon', { kind: 'echo' }],
    ['write a.txt', { kind: 'write', path: 'a.txt', content: '' }],
    ['write a.txt  two spaces\nand a line', { kind: 'write', path: 'a.txt', content: ' two spaces\nand a line' }],
    ['writer a.txt x', { kind: 'echo' }],
    ['hello', { kind: 'echo' }],
  ])('%j', (text, expected) => expect(parseCommand(text)).toEqual(expected));

  // The empty conversation offers these (contracts' AGENT_GUIDES): each must do what its line says.
  it('the examples the web app offers are the commands they claim to be', () => {
    expect(AGENT_GUIDES.scripted.examples.map((e) => parseCommand(e.message).kind)).toEqual(['write', 'sleep', 'fail', 'echo']);
  });
});

describe('splitIntoChunks', () => {
  it('splits into near-equal pieces that join back, without breaking surrogate pairs', () => {
    const text = 'ab🌳cd🌳ef';
    expect(splitIntoChunks(text, 4)).toEqual(['ab', '🌳c', 'd🌳', 'ef']);
    expect(splitIntoChunks(text, 3).join('')).toBe(text);
    expect(splitIntoChunks('ab', 4)).toEqual(['a', 'b']);
  });
});

describe('workspace path guard', () => {
  it.each([
    ['', /it is empty/],
    ['/etc/passwd', /is absolute/],
    ['..', /contains "\.\."/],
    ['../x', /contains "\.\."/],
    ['a/../../x', /contains "\.\."/],
    ['a/../b', /contains "\.\."/],
    ['./.', /names the workspace itself/],
    ['a\0b', /NUL byte/],
  ])('refuses %j', (path, why) => expect(() => checkRelativePath(path)).toThrow(why));

  it('accepts plain relative paths and normalises ./ and //', () => {
    expect(checkRelativePath('./src//a.ts')).toEqual(['src', 'a.ts']);
  });

  it('creates parent directories and writes inside the workspace', async () => {
    expect(await writeWorkspaceFile({ workspaceDir, relPath: 'a/b/c.txt', content: 'é' })).toEqual({ bytes: 2 });
    expect(readFileSync(join(workspaceDir, 'a/b/c.txt'), 'utf8')).toBe('é');
  });

  it('does not follow a symlinked directory or a symlinked file out of the workspace', async () => {
    const outside = mkdtempSync(join(tmpdir(), 'gsp-out-'));
    try {
      symlinkSync(outside, join(workspaceDir, 'dirlink'));
      writeFileSync(join(outside, 'target.txt'), 'original');
      mkdirSync(join(workspaceDir, 'sub'));
      symlinkSync(join(outside, 'target.txt'), join(workspaceDir, 'sub', 'filelink'));
      await expect(writeWorkspaceFile({ workspaceDir, relPath: 'dirlink/new.txt', content: 'x' })).rejects.toThrow(/is a symlink/);
      await expect(writeWorkspaceFile({ workspaceDir, relPath: 'sub/filelink', content: 'x' })).rejects.toThrow(/is a symlink/);
      expect(readFileSync(join(outside, 'target.txt'), 'utf8')).toBe('original');
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it('works when the workspace dir itself is reached through a symlink', async () => {
    const alias = `${workspaceDir}-alias`;
    symlinkSync(workspaceDir, alias);
    try {
      await writeWorkspaceFile({ workspaceDir: alias, relPath: 'ok.txt', content: 'fine' });
      expect(readFileSync(join(workspaceDir, 'ok.txt'), 'utf8')).toBe('fine');
    } finally {
      rmSync(alias);
    }
  });
});
