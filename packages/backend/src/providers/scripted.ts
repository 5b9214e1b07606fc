import { setTimeout as delay } from 'node:timers/promises';
import type { AgentUser, Provider, TurnContext, TurnOutcome } from './types.ts';
import { writeWorkspaceFileAs } from './workspace-files.ts';

/**
 * The deterministic, offline provider: the default for the demo and the tests. What it does
 * depends only on the message and the turn's position in the thread. Commands (exact, lowercase):
 *   write <relative-path> <content...>   write a file in the workspace via a `write_file` tool call
 *   fail                                 append an error line; the turn fails
 *   sleep <ms>                           take that long (capped at 60 s), streaming meanwhile
 * Anything else is echoed back.
 */
export const SLEEP_CAP_MS = 60_000;
const MIN_CHUNKS = 4;
const MAX_CHUNKS = 32;

export interface ScriptedOptions {
  /** Pause before each streamed chunk (GROVE_SCRIPTED_DELAY_MS). */
  delayMs: number;
  /** The agent's user: the `write` command's file is written as it, so the agent owns what its tools made. */
  user?: AgentUser | null;
}

export type ScriptedCommand =
  | { kind: 'echo' }
  | { kind: 'fail' }
  | { kind: 'sleep'; ms: number }
  | { kind: 'write'; path: string; content: string };

export function parseCommand(text: string): ScriptedCommand {
  const trimmed = text.trim();
  if (trimmed === 'fail') return { kind: 'fail' };
  const sleep = /^sleep\s+(\d{1,9})$/.exec(trimmed);
  if (sleep?.[1] !== undefined) return { kind: 'sleep', ms: Math.min(Number(sleep[1]), SLEEP_CAP_MS) };
  // The content is everything after the single separator following the path, newlines included.
  const write = /^write\s+(\S+)(?:\s([\s\S]*))?$/.exec(text.trimStart());
  if (write?.[1] !== undefined) return { kind: 'write', path: write[1], content: write[2] ?? '' };
  return { kind: 'echo' };
}

export function createScriptedProvider(options: ScriptedOptions): Provider {
  return {
    name: 'scripted',
    runTurn: (text, ctx) => runScriptedTurn({ text, ctx, delayMs: options.delayMs, user: options.user ?? null }),
    sessionId: () => null,
  };
}

async function runScriptedTurn(args: { text: string; ctx: TurnContext; delayMs: number; user: AgentUser | null }): Promise<TurnOutcome> {
  const { text, ctx, delayMs, user } = args;
  const command = parseCommand(text);
  const suffix = `(turn ${ctx.turnNumber})`;

  if (command.kind === 'fail') {
    await ctx.appendLine({ kind: 'error', message: `Scripted failure, as requested. ${suffix}` });
    return { status: 'failed' };
  }

  if (command.kind === 'sleep') {
    const reply = `Slept for ${command.ms} ms as asked, streaming while I waited. ${suffix}`;
    const chunks = splitIntoChunks(reply, clamp(Math.ceil(command.ms / 250), MIN_CHUNKS, MAX_CHUNKS));
    await streamReply({ ctx, chunks, pauseMs: command.ms / chunks.length });
    return { status: 'completed' };
  }

  if (command.kind === 'write') {
    const callId = `${ctx.turn}-call-1`;
    await ctx.appendLine({ kind: 'tool_call', callId, tool: 'write_file', input: { path: command.path, content: command.content } });
    ctx.signal.throwIfAborted();
    const result = await writeWorkspaceFileAs(user, { workspaceDir: ctx.workspaceDir, relPath: command.path, content: command.content }).then(
      ({ bytes }) => ({ output: `wrote ${bytes} bytes to ${command.path}`, isError: false }),
      (err: unknown) => ({ output: err instanceof Error ? err.message : String(err), isError: true }),
    );
    await ctx.appendLine({ kind: 'tool_result', callId, ...result });
    const reply = result.isError ? `I could not write ${command.path}: ${result.output}. ${suffix}` : `I wrote ${command.path} (${result.output}). ${suffix}`;
    await streamReply({ ctx, chunks: splitIntoChunks(reply, chunkCountFor(reply)), pauseMs: delayMs });
    return { status: 'completed' };
  }

  const reply = `Scripted agent here. You said: "${text}". ${suffix}`;
  await streamReply({ ctx, chunks: splitIntoChunks(reply, chunkCountFor(reply)), pauseMs: delayMs });
  return { status: 'completed' };
}

/** Streams the chunks as deltas, then persists their concatenation as the assistant line. */
async function streamReply(args: { ctx: TurnContext; chunks: string[]; pauseMs: number }): Promise<void> {
  const { ctx, chunks, pauseMs } = args;
  for (const chunk of chunks) {
    await delay(pauseMs, undefined, { signal: ctx.signal });
    ctx.emitDelta(chunk);
  }
  await ctx.appendLine({ kind: 'assistant', text: chunks.join('') });
}

function chunkCountFor(text: string): number {
  return clamp(Math.ceil(text.length / 16), MIN_CHUNKS, MAX_CHUNKS);
}

/** `count` near-equal pieces (fewer only if the text is shorter), never splitting a surrogate pair. */
export function splitIntoChunks(text: string, count: number): string[] {
  const chars = Array.from(text);
  const n = Math.max(1, Math.min(count, chars.length));
  const chunks: string[] = [];
  for (let i = 0; i < n; i++) {
    chunks.push(chars.slice(Math.floor((i * chars.length) / n), Math.floor(((i + 1) * chars.length) / n)).join(''));
  }
  return chunks;
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}
