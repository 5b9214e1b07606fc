import { PLACEHOLDER_API_KEY } from '@grove/contracts';
import type { ClaudeAgentConfig } from '@grove/contracts';
import { silentLogger } from '../logger.ts';
import type { Logger } from '../logger.ts';
import { LineSplitter, TailBuffer, runAgentProcess } from './agent-process.ts';
import { SessionFile } from './session-file.ts';
import type { AgentUser, Provider, ProviderLine, TurnContext, TurnOutcome } from './types.ts';

/**
 * Claude Code, one `claude -p` process per turn (docs/agents.md):
 *   claude -p --output-format stream-json --verbose --include-partial-messages
 *          --permission-mode <mode> [--model <m>] [--resume <session>] -- <message>
 * Every stream-json event becomes a thread line:
 *   system/init            raw (verbatim) and the session id is kept for --resume
 *   assistant text         assistant          assistant tool_use   tool_call
 *   user tool_result       tool_result        result               raw (usage, cost); an error result also adds an error line
 *   stream_event           delta frames for text as it is generated (the full text follows in an assistant event)
 *   anything else          raw, verbatim; stdout that is not JSON is kept as raw {type:'stdout'}
 */
export interface ClaudeOptions {
  config: ClaudeAgentConfig;
  /** Where the session id is kept (the thread dir). */
  threadDir: string;
  /** ANTHROPIC_BASE_URL: the loopback relay to the host, which adds the real key. */
  baseUrl: string;
  /** The environment the CLI inherits (no GROVE_* variables). */
  baseEnv: Record<string, string>;
  /** The executable; default `claude` from PATH. Tests point it at a fake. */
  binary?: string;
  /** SIGINT -> SIGKILL delay on cancel (default 5 s). */
  graceMs?: number;
  /** The user the CLI runs as (the sandbox's agent user); absent: the backend's own. */
  user?: AgentUser | null;
  logger?: Logger;
}

/** Longest tool output kept in a thread line; the full output stays in the CLI's own session file. */
export const MAX_TOOL_OUTPUT_CHARS = 100_000;
/** Above this many bytes the message goes to stdin: one argv string may not exceed 128 KiB on Linux. */
const MAX_ARG_BYTES = 100_000;

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

export function createClaudeProvider(options: ClaudeOptions): Provider {
  const logger = (options.logger ?? silentLogger).child({ provider: 'claude' });
  const sessionFile = new SessionFile(options.threadDir, 'claude');
  let sessionId = sessionFile.read();

  const setSession = async (id: string | null): Promise<void> => {
    if (id === sessionId) return;
    sessionId = id;
    await sessionFile.write(id);
    logger.info({ sessionId: id }, id ? 'claude session recorded' : 'claude session cleared');
  };

  const runOnce = async (text: string, ctx: TurnContext, resume: string | null): Promise<RunResult> => {
    const argv = [options.binary ?? 'claude', ...claudeArgs({ config: options.config, resume })];
    const viaStdin = Buffer.byteLength(text) > MAX_ARG_BYTES;
    if (!viaStdin) argv.push('--', text);
    const translator = new StreamTranslator({ ctx, onSession: setSession, logger });
    const stderr = new TailBuffer();
    const splitter = new LineSplitter((line) => translator.push(line));
    let exit;
    try {
      exit = await runAgentProcess({
        argv,
        cwd: ctx.workspaceDir,
        env: claudeEnv({ baseEnv: options.baseEnv, config: options.config, baseUrl: options.baseUrl }),
        stdin: viaStdin ? text : undefined,
        signal: ctx.signal,
        graceMs: options.graceMs,
        user: options.user,
        onStdout: (chunk) => splitter.push(chunk),
        onStderr: (chunk) => stderr.push(chunk),
      });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') throw new Error(`the claude CLI (${argv[0]}) is not installed in this sandbox image; rebuild it with scripts/setup.sh`);
      throw err;
    }
    splitter.end();
    await translator.flush();
    return { exit, stderr: stderr.toString().trim(), translator };
  };

  return {
    name: 'claude',
    sessionId: () => sessionId,
    async runTurn(text, ctx): Promise<TurnOutcome> {
      const resume = sessionId;
      let run = await runOnce(text, ctx, resume);
      // The session's file is gone (a wiped state dir): say so, then start a new conversation.
      if (resume !== null && !ctx.signal.aborted && !run.translator.sawInit && /no conversation found/i.test(run.stderr)) {
        logger.warn({ sessionId: resume }, 'claude session not found; starting a new one');
        await ctx.appendLine({ kind: 'raw', provider: 'claude', event: { type: 'grove.session_lost', sessionId: resume, stderr: run.stderr } });
        await setSession(null);
        run = await runOnce(text, ctx, null);
      }
      if (ctx.signal.aborted) return { status: 'failed' }; // the backend records the turn as cancelled
      return finish(run, ctx);
    },
  };
}

interface RunResult {
  exit: { code: number | null; signal: NodeJS.Signals | null };
  stderr: string;
  translator: StreamTranslator;
}

async function finish(run: RunResult, ctx: TurnContext): Promise<TurnOutcome> {
  const { exit, stderr, translator } = run;
  const result = translator.result;
  const how = exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code ?? '?'}`;
  const tail = stderr ? `: ${stderr.slice(-1500)}` : '';
  if (result && result.is_error === true) {
    const why = typeof result.result === 'string' && result.result ? result.result : String(result.subtype ?? 'error');
    await ctx.appendLine({ kind: 'error', message: `Claude Code reported an error (${why})${tail}` });
    return { status: 'failed' };
  }
  if (exit.code !== 0) {
    await ctx.appendLine({ kind: 'error', message: `claude ${how}${result ? '' : ' before it finished the turn'}${tail}` });
    return { status: 'failed' };
  }
  if (!result) {
    await ctx.appendLine({ kind: 'error', message: `claude ended without a result${tail}` });
    return { status: 'failed' };
  }
  return { status: 'completed' };
}

export function claudeArgs(args: { config: ClaudeAgentConfig; resume: string | null }): string[] {
  const out = ['-p', '--output-format', 'stream-json', '--verbose', '--include-partial-messages', '--permission-mode', args.config.permissionMode];
  if (args.config.model) out.push('--model', args.config.model);
  if (args.resume) out.push('--resume', args.resume);
  return out;
}

export function claudeEnv(args: { baseEnv: Record<string, string>; config: ClaudeAgentConfig; baseUrl: string }): Record<string, string> {
  const env: Record<string, string> = { ...args.baseEnv, ...args.config.env };
  env.ANTHROPIC_BASE_URL = args.baseUrl;
  // A placeholder: without any key the CLI answers "not logged in" without asking the API. The
  // relay on the host replaces it with the real key, which never enters the sandbox.
  env.ANTHROPIC_API_KEY = PLACEHOLDER_API_KEY;
  delete env.ANTHROPIC_AUTH_TOKEN;
  // HTTP(S)_PROXY point at the egress gate, which refuses loopback: the relay must be reached directly.
  const noProxy = (env.NO_PROXY ?? env.no_proxy ?? '').split(',').filter(Boolean);
  for (const host of ['127.0.0.1', 'localhost']) if (!noProxy.includes(host)) noProxy.push(host);
  env.NO_PROXY = noProxy.join(',');
  env.no_proxy = env.NO_PROXY;
  return env;
}

/** Turns stream-json lines into thread lines and delta frames, strictly in order. */
class StreamTranslator {
  sawInit = false;
  result: Json | null = null;
  private queue: Promise<void> = Promise.resolve();
  private failure: unknown = null;

  constructor(
    private readonly deps: {
      ctx: TurnContext;
      onSession: (id: string) => Promise<void>;
      logger: Logger;
    },
  ) {}

  push(line: string): void {
    if (line.trim() === '') return;
    let event: unknown;
    try {
      event = JSON.parse(line);
    } catch {
      this.enqueue([{ kind: 'raw', provider: 'claude', event: { type: 'stdout', text: line } }]);
      return;
    }
    if (!isObject(event)) {
      this.enqueue([{ kind: 'raw', provider: 'claude', event }]);
      return;
    }
    if (event.type === 'stream_event') {
      // Deltas go out at once, not behind the queue of lines being written.
      const text = textDelta(event);
      if (text !== null) this.deps.ctx.emitDelta(text);
      return;
    }
    if (event.type === 'system' && event.subtype === 'init' && typeof event.session_id === 'string') {
      this.sawInit = true;
      const id = event.session_id;
      this.queue = this.queue.then(() => this.deps.onSession(id));
    }
    if (event.type === 'result') this.result = event;
    this.enqueue(toLines(event));
  }

  /** Resolves when every line so far is in the thread; rethrows the first append failure. */
  async flush(): Promise<void> {
    await this.queue;
    if (this.failure) throw this.failure;
  }

  private enqueue(lines: ProviderLine[]): void {
    for (const line of lines) {
      this.queue = this.queue.then(async () => {
        if (this.failure) return;
        try {
          await this.deps.ctx.appendLine(line);
        } catch (err) {
          this.failure = err;
          this.deps.logger.error({ err }, 'could not append a claude line');
        }
      });
    }
  }
}

/** Text of a top-level text_delta stream event, or null. Subagents' partial text is not streamed. */
function textDelta(event: Json): string | null {
  if (event.parent_tool_use_id !== null && event.parent_tool_use_id !== undefined) return null;
  const inner = event.event;
  if (!isObject(inner) || inner.type !== 'content_block_delta') return null;
  const delta = inner.delta;
  if (!isObject(delta) || delta.type !== 'text_delta' || typeof delta.text !== 'string') return null;
  return delta.text;
}

/** The thread lines of one stream-json event (exported for tests). */
export function toLines(event: Json): ProviderLine[] {
  const raw = (e: unknown): ProviderLine => ({ kind: 'raw', provider: 'claude', event: e });
  const message = isObject(event.message) ? event.message : null;
  const content = message && Array.isArray(message.content) ? (message.content as unknown[]) : null;

  if (event.type === 'assistant' && content) {
    const lines: ProviderLine[] = [];
    const other: unknown[] = [];
    for (const block of content) {
      if (isObject(block) && block.type === 'text' && typeof block.text === 'string') {
        if (block.text !== '') lines.push({ kind: 'assistant', text: block.text });
      } else if (isObject(block) && block.type === 'tool_use' && typeof block.id === 'string' && typeof block.name === 'string') {
        lines.push({ kind: 'tool_call', callId: block.id, tool: block.name, input: block.input ?? {} });
      } else {
        other.push(block);
      }
    }
    // Thinking and any block type Grove does not model: the event, verbatim, with just those blocks.
    if (other.length > 0) lines.push(raw({ ...event, message: { ...message, content: other } }));
    return lines;
  }

  if (event.type === 'user' && content) {
    const lines: ProviderLine[] = [];
    const other: unknown[] = [];
    for (const block of content) {
      if (isObject(block) && block.type === 'tool_result' && typeof block.tool_use_id === 'string') {
        lines.push({ kind: 'tool_result', callId: block.tool_use_id, output: toolOutput(block.content), isError: block.is_error === true });
      } else {
        other.push(block);
      }
    }
    if (other.length > 0) lines.push(raw({ ...event, message: { ...message, content: other } }));
    return lines;
  }

  return [raw(event)];
}

/** A tool_result's content (a string, or text and image blocks) as text, capped. */
export function toolOutput(content: unknown): string {
  let text: string;
  if (typeof content === 'string') text = content;
  else if (Array.isArray(content)) {
    text = content
      .map((part) => (isObject(part) && part.type === 'text' && typeof part.text === 'string' ? part.text : isObject(part) ? `[${String(part.type)}]` : String(part)))
      .join('\n');
  } else if (content === undefined || content === null) text = '';
  else text = JSON.stringify(content);
  if (text.length <= MAX_TOOL_OUTPUT_CHARS) return text;
  return `${text.slice(0, MAX_TOOL_OUTPUT_CHARS)}\n… (${text.length - MAX_TOOL_OUTPUT_CHARS} more characters not kept in the thread)`;
}
