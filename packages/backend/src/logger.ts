import { format } from 'node:util';

/**
 * A tiny JSON-line logger: one object per line on stdout, which `docker logs` and the host collect.
 * The method shapes are a subset of pino's (`log.info({ ...fields }, 'message')`), so a pino logger
 * can be passed to createBackend instead. Written by hand because the bundle must stay one
 * dependency-free file and pino's transports want worker threads.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'fatal';

export interface Logger {
  debug(fields: object, msg?: string): void;
  info(fields: object, msg?: string): void;
  warn(fields: object, msg?: string): void;
  error(fields: object, msg?: string): void;
  fatal(fields: object, msg?: string): void;
  child(bindings: object): Logger;
}

const LEVEL_RANK: Record<LogLevel, number> = { debug: 20, info: 30, warn: 40, error: 50, fatal: 60 };

export interface LoggerOptions {
  /** Receives one complete JSON line (with its trailing newline). Default: process.stdout. */
  write?: (line: string) => void;
  level?: LogLevel;
  bindings?: object;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const write = options.write ?? ((line: string) => void process.stdout.write(line));
  const minRank = LEVEL_RANK[options.level ?? 'info'];
  const make = (bindings: object): Logger => {
    const emit = (level: LogLevel) => (fields: object, msg?: string) => {
      if (LEVEL_RANK[level] < minRank) return;
      const record = { level, time: new Date().toISOString(), ...bindings, ...serializeFields(fields), ...(msg === undefined ? {} : { msg }) };
      write(`${safeStringify(record)}\n`);
    };
    return {
      debug: emit('debug'),
      info: emit('info'),
      warn: emit('warn'),
      error: emit('error'),
      fatal: emit('fatal'),
      child: (more) => make({ ...bindings, ...more }),
    };
  };
  return make(options.bindings ?? {});
}

/** A logger that drops everything; the default for in-process tests that do not inspect logs. */
export const silentLogger: Logger = createLogger({ write: () => undefined });

function serializeFields(fields: object): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) out[key] = value instanceof Error ? serializeError(value) : value;
  return out;
}

/** Errors do not JSON.stringify (their fields are non-enumerable); keep message, code, stack and the cause chain. */
export function serializeError(err: Error, depth = 0): Record<string, unknown> {
  const out: Record<string, unknown> = { type: err.name, message: err.message, stack: err.stack };
  const code = (err as { code?: unknown }).code;
  if (code !== undefined) out['code'] = code;
  if (err.cause !== undefined && depth < 5) {
    out['cause'] = err.cause instanceof Error ? serializeError(err.cause, depth + 1) : format('%o', err.cause);
  }
  return out;
}

function safeStringify(record: object): string {
  try {
    return JSON.stringify(record);
  } catch (err) {
    // A circular or BigInt field must not take the process down with it; keep what can be kept.
    const { level, time, msg } = record as { level?: unknown; time?: unknown; msg?: unknown };
    return JSON.stringify({ level, time, msg, logError: err instanceof Error ? err.message : String(err) });
  }
}
