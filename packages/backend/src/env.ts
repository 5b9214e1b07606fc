import { z } from 'zod';
import { GroveError, PROVIDER_RELAY_PORT, agentConfigSchema, parseOrThrow, slugSchema, warmIdSchema } from '@grove/contracts';
import type { AgentConfig } from '@grove/contracts';
import { PROVIDER_NAMES } from './providers/types.ts';
import type { AgentUser, ProviderName } from './providers/types.ts';

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
  /** The host's after-turn hook (docs/agents.md). */
  GROVE_HOST_HOOK_SOCKET: '/run/grove/host.sock',
  /** The host's credential relay; agents reach it as http://127.0.0.1:GROVE_PROVIDER_RELAY_PORT. */
  GROVE_PROVIDER_RELAY_SOCKET: '/run/grove/provider.sock',
  GROVE_PROVIDER_RELAY_PORT: PROVIDER_RELAY_PORT,
  /** The host's egress gate, relayed to from GROVE_EGRESS_PORT (DESIGN.md section 6). */
  GROVE_EGRESS_SOCKET: '/run/grove/egress.sock',
  /** Loopback port inside the container that HTTP(S)_PROXY point at. */
  GROVE_EGRESS_PORT: 3128,
  /** The pty helper the workspace terminals run on (docker/grove-pty.c, copied into the image). */
  GROVE_PTY_HELPER: '/opt/grove/grove-pty',
} as const;

/** `FOO=` in a compose file or `docker run -e FOO=` means "not set", not "the empty string". */
const unsetIfEmpty = (v: unknown) => (v === '' ? undefined : v);
const pathVar = (name: string) => z.string().startsWith('/', { error: `${name} must be an absolute path` });
const idVar = (name: string) =>
  z.coerce
    .number({ error: `${name} must be a numeric id` })
    .int({ error: `${name} must be a whole number` })
    .min(1, { error: `${name} must not be 0: agents never run as root` })
    .max(2 ** 31 - 1, { error: `${name} is out of range` });
const portVar = (name: string) =>
  z.coerce
    .number({ error: `${name} must be a port number` })
    .int({ error: `${name} must be a whole number` })
    .min(1, { error: `${name} must be between 1 and 65535` })
    .max(65535, { error: `${name} must be between 1 and 65535` });

const envSchema = z.object({
  /** The project's agent config as JSON (set by the host from <home>/config/<project>.json). */
  GROVE_AGENT_CONFIG: z.preprocess(unsetIfEmpty, z.string().optional()),
  GROVE_HOST_HOOK_SOCKET: z.preprocess(unsetIfEmpty, pathVar('GROVE_HOST_HOOK_SOCKET').default(ENV_DEFAULTS.GROVE_HOST_HOOK_SOCKET)),
  GROVE_PROVIDER_RELAY_SOCKET: z.preprocess(unsetIfEmpty, pathVar('GROVE_PROVIDER_RELAY_SOCKET').default(ENV_DEFAULTS.GROVE_PROVIDER_RELAY_SOCKET)),
  GROVE_PROVIDER_RELAY_PORT: z.preprocess(unsetIfEmpty, portVar('GROVE_PROVIDER_RELAY_PORT').default(ENV_DEFAULTS.GROVE_PROVIDER_RELAY_PORT)),
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
  /** The agent's user (set by the Docker driver): every agent process starts as it. Unset: agents run as the backend. */
  GROVE_AGENT_UID: z.preprocess(unsetIfEmpty, idVar('GROVE_AGENT_UID').optional()),
  GROVE_AGENT_GID: z.preprocess(unsetIfEmpty, idVar('GROVE_AGENT_GID').optional()),
  GROVE_EGRESS_SOCKET: z.preprocess(unsetIfEmpty, pathVar('GROVE_EGRESS_SOCKET').default(ENV_DEFAULTS.GROVE_EGRESS_SOCKET)),
  GROVE_EGRESS_PORT: z.preprocess(unsetIfEmpty, portVar('GROVE_EGRESS_PORT').default(ENV_DEFAULTS.GROVE_EGRESS_PORT)),
  GROVE_PTY_HELPER: z.preprocess(unsetIfEmpty, pathVar('GROVE_PTY_HELPER').default(ENV_DEFAULTS.GROVE_PTY_HELPER)),
});

export interface BackendEnv {
  socketPath: string;
  threadDir: string;
  workspaceDir: string;
  slug: string;
  provider: ProviderName;
  scriptedDelayMs: number;
  /** GROVE_AGENT_CONFIG, validated; its provider is the provider. */
  agent: AgentConfig | undefined;
  hostHookSocket: string;
  providerRelaySocket: string;
  providerRelayPort: number;
  egressSocket: string;
  egressPort: number;
  /** GROVE_AGENT_UID/GID: the user agent processes run as; null when both are unset. */
  agentUser: AgentUser | null;
  /** GROVE_PTY_HELPER: the grove-pty executable (tests point it at their own build). */
  ptyHelper: string;
}

/** Throws GroveError('invalid_input') naming every variable that is wrong. */
export function readEnv(env: Record<string, string | undefined> = process.env): BackendEnv {
  const parsed = parseOrThrow(envSchema, env, { what: 'environment' });
  const agent = parseAgentConfig(parsed.GROVE_AGENT_CONFIG, env.GROVE_PROVIDER);
  return {
    socketPath: parsed.GROVE_SOCKET,
    threadDir: parsed.GROVE_THREAD_DIR,
    workspaceDir: parsed.GROVE_WORKSPACE_DIR,
    slug: parsed.GROVE_SLUG,
    provider: agent?.provider ?? parsed.GROVE_PROVIDER,
    scriptedDelayMs: parsed.GROVE_SCRIPTED_DELAY_MS,
    agent,
    hostHookSocket: parsed.GROVE_HOST_HOOK_SOCKET,
    providerRelaySocket: parsed.GROVE_PROVIDER_RELAY_SOCKET,
    providerRelayPort: parsed.GROVE_PROVIDER_RELAY_PORT,
    egressSocket: parsed.GROVE_EGRESS_SOCKET,
    egressPort: parsed.GROVE_EGRESS_PORT,
    agentUser: agentUserOf(parsed.GROVE_AGENT_UID, parsed.GROVE_AGENT_GID),
    ptyHelper: parsed.GROVE_PTY_HELPER,
  };
}

/** A warm sandbox's backend (GROVE_POOL set, no GROVE_SLUG yet): where it waits to be claimed. */
export interface PoolEnv {
  pool: string;
  socketPath: string;
  /** The waiting socket's mode: the backend's alone (0600) in a sandbox with an agent user, as backend.sock is. */
  socketMode: number;
}

/**
 * GROVE_POOL: this backend was started for the warm pool and learns its slug from the host's POST /claim (pool-wait.ts)
 * before it serves anything. Null for an ordinary backend. A GROVE_SLUG beside it is refused: one identity only.
 */
export function readPoolEnv(env: Record<string, string | undefined> = process.env): PoolEnv | null {
  const pool = unsetIfEmpty(env.GROVE_POOL);
  if (pool === undefined) return null;
  if (unsetIfEmpty(env.GROVE_SLUG) !== undefined) throw new GroveError('invalid_input', 'GROVE_POOL and GROVE_SLUG are exclusive: a warm sandbox gets its slug when it is claimed');
  const socket = parseOrThrow(z.object({ GROVE_SOCKET: z.preprocess(unsetIfEmpty, pathVar('GROVE_SOCKET').default(ENV_DEFAULTS.GROVE_SOCKET)) }), env, { what: 'environment' });
  const agentUser = unsetIfEmpty(env.GROVE_AGENT_UID) !== undefined;
  return { pool: parseOrThrow(warmIdSchema, pool, { what: 'GROVE_POOL' }), socketPath: socket.GROVE_SOCKET, socketMode: agentUser ? 0o600 : 0o666 };
}

/** The environment of a warm sandbox's backend once claimed: its own, with the slug the host gave it. */
export function readClaimedEnv(slug: string, env: Record<string, string | undefined> = process.env): BackendEnv {
  return readEnv({ ...env, GROVE_POOL: undefined, GROVE_SLUG: slug });
}

function agentUserOf(uid: number | undefined, gid: number | undefined): AgentUser | null {
  if (uid === undefined && gid === undefined) return null;
  if (uid === undefined || gid === undefined) throw new GroveError('invalid_input', 'GROVE_AGENT_UID and GROVE_AGENT_GID go together: set both or neither');
  return { uid, gid };
}

function parseAgentConfig(json: string | undefined, providerVar: string | undefined): AgentConfig | undefined {
  if (json === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (err) {
    throw new GroveError('invalid_input', `GROVE_AGENT_CONFIG is not valid JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  const agent = parseOrThrow(agentConfigSchema, value, { what: 'GROVE_AGENT_CONFIG' });
  if (providerVar && providerVar !== agent.provider) {
    throw new GroveError('invalid_input', `GROVE_PROVIDER is "${providerVar}" but GROVE_AGENT_CONFIG configures "${agent.provider}"`);
  }
  return agent;
}

/** The environment agent CLIs inherit: the backend's own, without Grove's variables (they are not the agent's business). */
export function agentEnv(env: Record<string, string | undefined> = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (value !== undefined && !name.startsWith('GROVE_')) out[name] = value;
  }
  return out;
}
