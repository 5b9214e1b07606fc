import { MESSAGE_PLACEHOLDER } from '@grove/contracts';
import type { CommandAgentConfig } from '@grove/contracts';
import { silentLogger } from '../logger.ts';
import type { Logger } from '../logger.ts';
import { TailBuffer, runAgentProcess } from './agent-process.ts';
import type { AgentUser, Provider, TurnContext, TurnOutcome } from './types.ts';

/**
 * Any CLI agent (Aider, Codex, a script): one process per turn in the workspace, the message in
 * argv (`{message}`) or on stdin. Its stdout streams to clients as delta frames and is kept as the
 * turn's assistant line; stderr is kept as a raw line. Exit code 0 completes the turn; anything
 * else appends an error line and fails it.
 */
export interface CommandOptions {
  config: CommandAgentConfig;
  /** The environment the agent inherits (no GROVE_* variables). */
  baseEnv: Record<string, string>;
  /** ANTHROPIC_BASE_URL when the config asks for the provider relay. */
  relayUrl?: string;
  graceMs?: number;
  /** The user the agent runs as (the sandbox's agent user); absent: the backend's own. */
  user?: AgentUser | null;
  logger?: Logger;
}

/** The most stdout/stderr kept in the thread per turn; the rest is counted, not stored. */
export const MAX_OUTPUT_CHARS = 200_000;

export function commandArgv(config: CommandAgentConfig, message: string): string[] {
  if (config.input === 'stdin') return [...config.argv];
  // split/join rather than replaceAll: a `$&` in the message must stay literal.
  return config.argv.map((arg, i) => (i === 0 ? arg : arg.split(MESSAGE_PLACEHOLDER).join(message)));
}

export function createCommandProvider(options: CommandOptions): Provider {
  const logger = (options.logger ?? silentLogger).child({ provider: 'command' });
  const { config } = options;
  return {
    name: 'command',
    sessionId: () => null,
    async runTurn(text: string, ctx: TurnContext): Promise<TurnOutcome> {
      const argv = commandArgv(config, text);
      const env: Record<string, string> = { ...options.baseEnv, ...config.env };
      if (config.providerRelay && options.relayUrl) env.ANTHROPIC_BASE_URL = options.relayUrl;
      const stdout = new CappedText(MAX_OUTPUT_CHARS);
      const stderr = new CappedText(MAX_OUTPUT_CHARS);
      const stderrTail = new TailBuffer(1500);

      // A turn limit is a cancel the agent did not ask for: same signals, reported as a timeout.
      const timeout = config.timeoutMs === undefined ? null : AbortSignal.timeout(config.timeoutMs);
      const signal = timeout ? AbortSignal.any([ctx.signal, timeout]) : ctx.signal;

      let exit;
      try {
        exit = await runAgentProcess({
          argv,
          cwd: ctx.workspaceDir,
          env,
          stdin: config.input === 'stdin' ? text : undefined,
          signal,
          graceMs: options.graceMs,
          user: options.user,
          onStdout: (chunk) => {
            stdout.push(chunk);
            ctx.emitDelta(chunk);
          },
          onStderr: (chunk) => {
            stderr.push(chunk);
            stderrTail.push(chunk);
          },
        });
      } catch (err) {
        const e = err as NodeJS.ErrnoException;
        const why = e.code === 'ENOENT' ? 'it is not installed in this sandbox image (or not on PATH)' : e.code === 'EACCES' ? 'it is not executable' : e.message;
        await ctx.appendLine({ kind: 'error', message: `could not start ${JSON.stringify(argv[0])}: ${why}` });
        return { status: 'failed' };
      }
      logger.debug({ code: exit.code, signal: exit.signal, cancelled: exit.cancelled }, 'command agent exited');

      if (stdout.text() !== '') await ctx.appendLine({ kind: 'assistant', text: stdout.text() });
      if (stderr.text() !== '') await ctx.appendLine({ kind: 'raw', provider: 'command', event: { type: 'stderr', text: stderr.text() } });
      if (ctx.signal.aborted) return { status: 'failed' }; // recorded as cancelled by the backend
      if (timeout?.aborted) {
        await ctx.appendLine({ kind: 'error', message: `${argv[0]} took longer than ${config.timeoutMs} ms and was stopped` });
        return { status: 'failed' };
      }
      if (exit.code === 0) return { status: 'completed' };
      const how = exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code ?? '?'}`;
      const tail = stderrTail.toString().trim();
      await ctx.appendLine({ kind: 'error', message: `${argv[0]} ${how}${tail ? `: ${tail}` : ''}` });
      return { status: 'failed' };
    },
  };
}

class CappedText {
  private value = '';
  private dropped = 0;
  constructor(private readonly max: number) {}
  push(chunk: string): void {
    const room = this.max - this.value.length;
    if (room >= chunk.length) this.value += chunk;
    else {
      this.value += chunk.slice(0, Math.max(0, room));
      this.dropped += chunk.length - Math.max(0, room);
    }
  }
  text(): string {
    return this.dropped === 0 ? this.value : `${this.value}\n… (${this.dropped} more characters not kept in the thread)`;
  }
}
