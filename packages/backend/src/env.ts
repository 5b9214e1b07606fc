import { z } from 'zod';
import { parseOrThrow, slugSchema } from '@grove/contracts';
import { PROVIDER_NAMES } from './providers/types.ts';
import type { ProviderName } from './providers/types.ts';

/**
 * The only place that reads process.env. Defaults mirror SANDBOX_PATHS in packages/sandbox
 * (duplicated, not imported, so the bundle does not pull in the Docker driver; env.test.ts checks
 * that they agree).
 */
export const ENV_DEFAULTS = {
  GROVE_SOCKET: '/run/grove/backend.sock',
  GROVE_THREAD_DIR: '/var/lib/grove/thread',
  GROVE_WORKSPACE_DIR: '/workspace',
  GROVE_PROVIDER: 'scripted',
  GROVE_SCRIPTED_DELAY_MS: 25,
  /** The host's egress gate, relayed to from GROVE_EGRESS_PORT (DESIGN.md section 6). */
  GROVE_EGRESS_SOCKET: '/run/grove/egress.sock',
  /** Loopback port inside the container that HTTP(S)_PROXY point at. */
  GROVE_EGRESS_PORT: 3128,
} as const;

/** `FOO=` in a compose file or `docker run -e FOO=` means "not set", not "the empty string". */
const unsetIfEmpty = (v: unknown) => (v === '' ? undefined : v);
const pathVar = (name: string) => z.string().startsWith('/', { error: `${name} must be an absolute path` });

const envSchema = z.object({
  GROVE_SOCKET: z.preprocess(unsetIfEmpty, pathVar('GROVE_SOCKET').default(ENV_DEFAULTS.GROVE_SOCKET)),
  GROVE_THREAD_DIR: z.preprocess(unsetIfEmpty, pathVar('GROVE_THREAD_DIR').default(ENV_DEFAULTS.GROVE_THREAD_DIR)),
  GROVE_WORKSPACE_DIR: z.preprocess(unsetIfEmpty, pathVar('GROVE_WORKSPACE_DIR').default(ENV_DEFAULTS.GROVE_WORKSPACE_DIR)),
  GROVE_SLUG: z.preprocess(unsetIfEmpty, z.string({ error: 'GROVE_SLUG is required (the workspace slug)' }).pipe(slugSchema)),
  GROVE_PROVIDER: z.preprocess(
    unsetIfEmpty,
    z.enum(PROVIDER_NAMES, { error: `GROVE_PROVIDER must be one of: ${PROVIDER_NAMES.join(', ')}` }).default(ENV_DEFAULTS.GROVE_PROVIDER),
  ),
  GROVE_SCRIPTED_DELAY_MS: z.preprocess(
    unsetIfEmpty,
    z.coerce
      .number({ error: 'GROVE_SCRIPTED_DELAY_MS must be a number of milliseconds' })
      .int({ error: 'GROVE_SCRIPTED_DELAY_MS must be a whole number' })
      .min(0, { error: 'GROVE_SCRIPTED_DELAY_MS must not be negative' })
      .max(10_000, { error: 'GROVE_SCRIPTED_DELAY_MS must be at most 10000' })
      .default(ENV_DEFAULTS.GROVE_SCRIPTED_DELAY_MS),
  ),
  GROVE_EGRESS_SOCKET: z.preprocess(unsetIfEmpty, pathVar('GROVE_EGRESS_SOCKET').default(ENV_DEFAULTS.GROVE_EGRESS_SOCKET)),
  GROVE_EGRESS_PORT: z.preprocess(
    unsetIfEmpty,
    z.coerce
      .number({ error: 'GROVE_EGRESS_PORT must be a port number' })
      .int({ error: 'GROVE_EGRESS_PORT must be a whole number' })
      .min(1, { error: 'GROVE_EGRESS_PORT must be between 1 and 65535' })
      .max(65535, { error: 'GROVE_EGRESS_PORT must be between 1 and 65535' })
      .default(ENV_DEFAULTS.GROVE_EGRESS_PORT),
  ),
});

export interface BackendEnv {
  socketPath: string;
  threadDir: string;
  workspaceDir: string;
  slug: string;
  provider: ProviderName;
  scriptedDelayMs: number;
  egressSocket: string;
  egressPort: number;
}

/** Throws GroveError('invalid_input') naming every variable that is wrong. */
export function readEnv(env: Record<string, string | undefined> = process.env): BackendEnv {
  const parsed = parseOrThrow(envSchema, env, { what: 'environment' });
  return {
    socketPath: parsed.GROVE_SOCKET,
    threadDir: parsed.GROVE_THREAD_DIR,
    workspaceDir: parsed.GROVE_WORKSPACE_DIR,
    slug: parsed.GROVE_SLUG,
    provider: parsed.GROVE_PROVIDER,
    scriptedDelayMs: parsed.GROVE_SCRIPTED_DELAY_MS,
    egressSocket: parsed.GROVE_EGRESS_SOCKET,
    egressPort: parsed.GROVE_EGRESS_PORT,
  };
}
