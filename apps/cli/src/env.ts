// The CLI's configuration: the only place that reads process.env.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';

const schema = z.object({
  GROVE_URL: z.string().url().default('http://localhost:4300'),
  GROVE_TOKEN: z.string().optional(),
  GROVE_HOME: z.string().default(path.join(os.homedir(), '.grove')),
  GROVE_PORT: z.string().optional(),
});

export interface CliEnv {
  url: string;
  token: string | undefined;
  /** GROVE_HOME, absolute: where the server keeps its state, token, log and (started by `grove up`) pid file. */
  home: string;
  /** The environment a server started by `grove up` gets: this one, with GROVE_HOME and GROVE_PORT agreeing with GROVE_URL. */
  serverEnv: NodeJS.ProcessEnv;
}

/** The token the server generated under GROVE_HOME, if there is one yet. */
export function readHomeToken(home: string): string | undefined {
  try {
    return fs.readFileSync(path.join(home, 'token'), 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/** GROVE_TOKEN, else the token the server generated under GROVE_HOME. */
export function loadCliEnv(source: NodeJS.ProcessEnv = process.env): CliEnv {
  const env = schema.parse(source);
  const home = path.resolve(env.GROVE_HOME);
  const url = env.GROVE_URL.replace(/\/$/, '');
  const u = new URL(url);
  const port = env.GROVE_PORT ?? (u.port || (u.protocol === 'https:' ? '443' : '80'));
  return {
    url,
    token: env.GROVE_TOKEN || readHomeToken(home),
    home,
    serverEnv: { ...source, GROVE_HOME: home, GROVE_PORT: port },
  };
}
