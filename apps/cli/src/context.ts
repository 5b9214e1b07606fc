// What every command is handed: the environment, the API client, and the terminal it talks to.
import type { z } from 'zod';
import type { GroveClient } from '@grove/client';
import { createClient } from './client.ts';
import type { CliEnv } from './env.ts';
import { EXIT, Exit } from './exit.ts';

export interface CliIo {
  stdin: NodeJS.ReadStream;
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
}

export interface CliContext extends CliIo {
  env: CliEnv;
  /** The registry API, one typed call per endpoint of the table (errors as ApiError). */
  api: GroveClient;
  /** One line of the command's answer, on stdout. */
  out(line: string): void;
  /** One line of progress, hints or errors, on stderr: stdout stays the answer (and JSON with --json). */
  err(line: string): void;
}

export function createContext(env: CliEnv, io: CliIo): CliContext {
  return {
    ...io,
    env,
    api: createClient(env).api,
    out: (line) => void io.stdout.write(`${line}\n`),
    err: (line) => void io.stderr.write(`${line}\n`),
  };
}

/** A request body checked with its contracts schema before it is sent; a bad option is a usage error (exit 2). */
export function checked<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  throw new Exit(EXIT.usage, `${issue?.path.length ? `--${issue.path.join('.')}: ` : ''}${issue?.message ?? 'invalid option'}`);
}
