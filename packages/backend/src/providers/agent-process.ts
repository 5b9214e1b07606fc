import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { StringDecoder } from 'node:string_decoder';
import type { AgentUser } from './types.ts';

/**
 * One run of an agent CLI for one turn: its own process group (so a cancel reaches whatever it
 * started), stdout and stderr delivered as decoded text, and a cancel that is SIGINT first (agents
 * save their session and print a final result on it) and SIGKILL for the whole group after a grace
 * period.
 */
export interface AgentProcessOptions {
  argv: readonly string[];
  cwd: string;
  env: Record<string, string>;
  /** Written to stdin, which is then closed; without it stdin is /dev/null. */
  stdin?: string;
  /** Run as this user (setgid, setgroups, setuid before exec: it keeps no capability); absent: as the backend. */
  user?: AgentUser | null;
  signal: AbortSignal;
  /** SIGINT -> SIGKILL delay on cancel. Default 5 s. */
  graceMs?: number;
  /** Text as it arrives, never splitting a UTF-8 sequence. */
  onStdout(text: string): void;
  onStderr(text: string): void;
}

export interface AgentExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The abort signal fired while the process ran. */
  cancelled: boolean;
  /** It had to be killed with SIGKILL after the grace period. */
  killed: boolean;
}

export const DEFAULT_GRACE_MS = 5_000;
/** After the agent exits, output still buffered in pipes held open by its children is read for this long at most. */
const DRAIN_MS = 2_000;

/** Resolves when the agent has exited (whatever the code); rejects only when it could not be started (ENOENT, EACCES). */
export function runAgentProcess(options: AgentProcessOptions): Promise<AgentExit> {
  const [file, ...args] = options.argv;
  if (file === undefined) return Promise.reject(new Error('empty argv'));
  const graceMs = options.graceMs ?? DEFAULT_GRACE_MS;

  return new Promise((resolve, reject) => {
    if (options.signal.aborted) {
      resolve({ code: null, signal: null, cancelled: true, killed: false });
      return;
    }
    // Typed as the base class: the stdio overloads disagree on a computed stdio array.
    const child: ChildProcess = spawn(file, args, {
      cwd: options.cwd,
      // A cast, not a spread of process.env: the agent gets exactly this environment. (Next's types,
      // in the root typecheck, declare NODE_ENV as required on ProcessEnv.)
      env: options.env as NodeJS.ProcessEnv,
      // A process group of its own: the cancel signals reach the agent's tools and shells too.
      detached: true,
      stdio: [options.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      ...(options.user ? { uid: options.user.uid, gid: options.user.gid } : {}),
    });
    let cancelled = false;
    let killed = false;
    let killTimer: NodeJS.Timeout | undefined;
    let settled = false;

    const signalGroup = (sig: NodeJS.Signals): void => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, sig);
      } catch {
        // The group is already gone.
      }
    };
    const onAbort = (): void => {
      if (cancelled) return;
      cancelled = true;
      signalGroup('SIGINT');
      killTimer = setTimeout(() => {
        killed = true;
        signalGroup('SIGKILL');
      }, graceMs);
    };
    options.signal.addEventListener('abort', onAbort, { once: true });

    const pipeText = (stream: NodeJS.ReadableStream | null, sink: (text: string) => void): void => {
      if (!stream) return;
      const decoder = new StringDecoder('utf8');
      stream.on('data', (chunk: Buffer) => {
        const text = decoder.write(chunk);
        if (text) sink(text);
      });
      stream.on('end', () => {
        const rest = decoder.end();
        if (rest) sink(rest);
      });
    };
    pipeText(child.stdout, options.onStdout);
    pipeText(child.stderr, options.onStderr);

    if (options.stdin !== undefined && child.stdin) {
      // An agent that exits without reading its input is not an error of ours.
      child.stdin.on('error', () => undefined);
      child.stdin.end(options.stdin);
    }

    const finish = (result: AgentExit | Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(killTimer);
      options.signal.removeEventListener('abort', onAbort);
      if (result instanceof Error) reject(result);
      else resolve(result);
    };

    child.once('error', (err) => finish(err));
    child.once('exit', (code, signal) => {
      const result: AgentExit = { code, signal, cancelled, killed };
      // 'close' waits for stdout and stderr to end, which a background child holding the pipes can
      // postpone forever: read what is there for a moment, then stop listening.
      const drain = setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        finish(result);
      }, DRAIN_MS);
      child.once('close', () => {
        clearTimeout(drain);
        finish(result);
      });
    });
  });
}

/** Splits a text stream into lines (without the newline); the last, unterminated piece waits for more. */
export class LineSplitter {
  private buffer = '';

  constructor(
    private readonly onLine: (line: string) => void,
    /** A line longer than this is delivered in pieces rather than held in memory. */
    private readonly maxLineChars = 16 * 1024 * 1024,
  ) {}

  push(text: string): void {
    this.buffer += text;
    let nl: number;
    while ((nl = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, nl);
      this.buffer = this.buffer.slice(nl + 1);
      this.onLine(line.endsWith('\r') ? line.slice(0, -1) : line);
    }
    if (this.buffer.length > this.maxLineChars) {
      const piece = this.buffer;
      this.buffer = '';
      this.onLine(piece);
    }
  }

  /** Delivers the unterminated rest, if any. */
  end(): void {
    if (this.buffer === '') return;
    const rest = this.buffer;
    this.buffer = '';
    this.onLine(rest);
  }
}

/** Keeps the last `max` characters written, for error messages. */
export class TailBuffer {
  private text = '';
  constructor(private readonly max = 4000) {}
  push(chunk: string): void {
    this.text = (this.text + chunk).slice(-this.max);
  }
  toString(): string {
    return this.text;
  }
}
