// The CLI's configuration: the only place that reads process.env.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';

const schema = z.object({
  GROVE_URL: z.string().url().default('http://localhost:4300'),
  GROVE_TOKEN: z.string().optional(),
  GROVE_HOME: z.string().default(path.join(os.homedir(), '.grove')),
});

export interface CliEnv {
  url: string;
  token: string | undefined;
}

/** GROVE_TOKEN, else the token the server generated under GROVE_HOME. */
export function loadCliEnv(source: Record<string, string | undefined> = process.env): CliEnv {
  const env = schema.parse(source);
  let token = env.GROVE_TOKEN;
  if (!token) {
    try {
      token = fs.readFileSync(path.join(env.GROVE_HOME, 'token'), 'utf8').trim();
    } catch {
      token = undefined;
    }
  }
  return { url: env.GROVE_URL.replace(/\/$/, ''), token };
}
