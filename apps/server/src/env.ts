// The server's configuration: the only place that reads process.env, checked with zod at start.
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { gitSshCommandSchema, sandboxRuntimeSchema } from '@grove/contracts';

/**
 * What one running workspace is budgeted in memory for the default cap. The real agent (Claude Code) in a turn peaked
 * at 136 MiB under runc and 152 MiB under runsc (cgroup high-water mark, 20 workspaces, docs/benchmarks.md); this is
 * that rounded up to leave room for what its tools start. The sandbox's hard limit stays 512 MiB.
 */
export const WORKSPACE_MEMORY_BUDGET_BYTES = 256 * 1024 * 1024;
/** Running workspaces per core for the default cap: a turn's agent used 3-8% of a core, its tools (a build, tests) far more. */
export const WORKSPACES_PER_CORE = 4;

/** The default cap: what half the host's memory holds at the budget, and at most WORKSPACES_PER_CORE per core. */
export function defaultMaxRunning(totalMemBytes = os.totalmem(), cores = os.availableParallelism()): number {
  const byMemory = Math.floor((totalMemBytes * 0.5) / WORKSPACE_MEMORY_BUDGET_BYTES);
  return Math.max(1, Math.min(byMemory, cores * WORKSPACES_PER_CORE, 256));
}

const bool = z
  .enum(['1', '0', 'true', 'false', 'yes', 'no'])
  .transform((v) => v === '1' || v === 'true' || v === 'yes');

const DURATION_UNITS_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 } as const;

/** A duration like 30m, 90s, 1h, 500ms or a number of milliseconds; 0 or off disables (returns 0). */
export const durationMs = z
  .string()
  .trim()
  .toLowerCase()
  .regex(/^(off|\d+(ms|s|m|h)?)$/, { error: 'expected a duration such as 30m, 90s, 1h, 500ms (or 0/off to disable)' })
  .transform((v) => {
    if (v === 'off') return 0;
    const m = /^(\d+)(ms|s|m|h)?$/.exec(v);
    const unit = (m?.[2] ?? 'ms') as keyof typeof DURATION_UNITS_MS;
    return Number(m?.[1] ?? 0) * DURATION_UNITS_MS[unit];
  });

const SIZE_UNITS = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 } as const;
/** Smallest disk quota a workspace's filesystem image can have (core's MIN_VOLUME_BYTES). */
const MIN_DISK_QUOTA = 16 * 1024 ** 2;

/** A size like 4G, 512M, 4GiB or a number of bytes (binary units); 0 or off: no quota (returns 0). */
export const byteSize = z
  .string()
  .trim()
  .toLowerCase()
  .regex(/^(off|\d+([kmgt](i?b)?)?)$/, { error: 'expected a size such as 4G, 512M, 4GiB or a number of bytes (or 0/off for no quota)' })
  .transform((v) => {
    if (v === 'off') return 0;
    const m = /^(\d+)([kmgt])?/.exec(v);
    return Number(m?.[1] ?? 0) * SIZE_UNITS[(m?.[2] ?? '') as keyof typeof SIZE_UNITS];
  })
  .refine((n) => n === 0 || (Number.isSafeInteger(n) && n >= MIN_DISK_QUOTA), { error: `a disk quota must be at least 16M (or 0/off)` });

const here = path.dirname(fileURLToPath(import.meta.url));

export const envSchema = z.object({
  GROVE_HOME: z.string().min(1).default(path.join(os.homedir(), '.grove')),
  /**
   * The registry in PostgreSQL (postgres://user:pass@host:5432/db, or a socket dir as ?host=/run/postgresql) instead
   * of SQLite at <GROVE_HOME>/grove.db: several servers sharing it never exceed GROVE_MAX_RUNNING between them.
   */
  DATABASE_URL: z.preprocess(
    // Set but empty counts as unset, as a shell's `DATABASE_URL= grove up` means.
    (v) => (typeof v === 'string' && v.trim() === '' ? undefined : v),
    z
      .string()
      .trim()
      .regex(/^postgres(ql)?:\/\/\S+$/, { error: 'DATABASE_URL must be a postgres:// or postgresql:// URL (unset: SQLite in GROVE_HOME)' })
      .optional(),
  ),
  GROVE_PORT: z.coerce.number().int().min(0).max(65535).default(4300),
  GROVE_HOST: z.string().min(1).default('127.0.0.1'),
  /**
   * The preview listener (another port, so another origin: agent-built pages never run on the dashboard's).
   * Default GROVE_PORT + 1 (0 when GROVE_PORT is 0); 0 = an ephemeral port.
   */
  GROVE_PREVIEW_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  /** The preview listener's public origin when a reverse proxy serves it elsewhere, e.g. https://preview.example.com. */
  GROVE_PREVIEW_URL: z
    .url({ protocol: /^https?$/, error: 'GROVE_PREVIEW_URL must be an http(s) URL' })
    .refine((u) => /^https?:\/\/[^/?#]+\/?$/.test(u), { error: 'GROVE_PREVIEW_URL must be an origin (scheme, host, port), without a path' })
    .optional(),
  GROVE_TOKEN: z.string().min(16, { error: 'GROVE_TOKEN must be at least 16 characters' }).optional(),
  GROVE_MAX_RUNNING: z.coerce.number().int().min(1).max(256).default(defaultMaxRunning()),
  /**
   * Warm sandboxes kept ready for the next fork (started ahead, claimed by a fork, refilled in the background); they
   * hold slots only while no workspace needs them. 0: none, every fork starts its sandbox.
   */
  GROVE_WARM_POOL: z.coerce.number().int().min(0).max(8).default(1),
  GROVE_IMAGE: z.string().min(1).default('grove-sandbox:latest'),
  /** Register the bundled demo project (and its default workspace) at start. */
  GROVE_DEMO: bool.default(true),
  GROVE_DOCKER_SOCKET: z.string().optional(),
  /** The sandboxes' OCI runtime: runc, or runsc (gVisor, a user-space kernel between agent and host; setup configures it). */
  GROVE_RUNTIME: sandboxRuntimeSchema.default('runc'),
  GROVE_HEALTH_TIMEOUT_MS: z.coerce.number().int().min(100).default(30_000),
  /** How long a workspace backend may take to start answering a proxied request before the client gets 504 backend_timeout. */
  GROVE_BACKEND_TIMEOUT_MS: z.coerce.number().int().min(100).default(60_000),
  // The front door's fast lane for body-less GET/HEAD under /w/<slug>/ (lane.ts); 0 sends every request through
  // node's HTTP server, as before it.
  GROVE_FAST_LANE: z.enum(['0', '1']).default('1'),
  /**
   * Each workspace's disk quota: its worktree and agent state live in a filesystem image of this size (sparse: the
   * host pays for what is written). Needs root (loop mounts); 0/off: no quota.
   */
  GROVE_DISK_QUOTA: byteSize.default(4 * 1024 ** 3),
  /** Each workspace's inode quota (files and directories) in that filesystem. */
  GROVE_INODE_QUOTA: z.coerce.number().int().min(64).max(2 ** 31).default(200_000),
  /** Running workspaces idle this long (no request, no turn) stop themselves and free their slot; 0/off: never. */
  GROVE_IDLE_STOP: durationMs.default(30 * 60_000),
  /** Where the Next.js dashboard lives; the server mounts it by Next's public API when it is built. */
  GROVE_WEB_DIR: z.string().default(path.resolve(here, '../../web')),
  /** Files of the bundled demo repository. */
  GROVE_DEMO_DIR: z.string().default(path.resolve(here, '../../../infra/demo-repo')),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /**
   * The provider key. It stays in this process: the credential relay adds it to agents' API calls on
   * the host (docs/agents.md); no sandbox ever sees it. Unset: agents' calls answer 503 with a hint.
   */
  ANTHROPIC_API_KEY: z.string().min(1).optional(),
  /**
   * The forge token publish uses to open pull requests (docs/git-flow.md). It stays in this process: sent only
   * in the Authorization header of forge API calls (and of git over https to the forge's own host), never
   * written to a config, remote URL, log or thread. Unset: publish answers not_configured.
   */
  GROVE_FORGE_TOKEN: z.string().min(1).optional(),
  /**
   * The ssh Grove's remote git (clone, fetch, push) runs, e.g. `ssh -i /etc/grove/deploy_key -o
   * UserKnownHostsFile=/etc/grove/known_hosts`; unset: ssh with this user's ~/.ssh. Always in BatchMode.
   */
  GROVE_GIT_SSH_COMMAND: gitSshCommandSchema.optional(),
  /** How often every project is fetched and published workspaces' pull requests are checked; 0: never. */
  GROVE_WATCH_INTERVAL_MS: z.coerce.number().int().min(0).default(5 * 60_000),
  /** Where the relay sends agents' API calls. Plain HTTP only to a loopback address (a local test server). */
  GROVE_ANTHROPIC_UPSTREAM: z
    .url({ protocol: /^https?$/, error: 'GROVE_ANTHROPIC_UPSTREAM must be an http(s) URL' })
    .refine((u) => u.startsWith('https://') || /^http:\/\/(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?(\/|$)/.test(u), {
      error: 'GROVE_ANTHROPIC_UPSTREAM must use https (plain http only to a loopback address): the relay sends the API key there',
    })
    .default('https://api.anthropic.com'),
});

export type Env = Omit<z.infer<typeof envSchema>, 'GROVE_PREVIEW_PORT'> & { GROVE_PREVIEW_PORT: number };

export function loadEnv(source: Record<string, string | undefined> = process.env): Env {
  const r = envSchema
    .refine((e) => e.GROVE_PREVIEW_PORT !== undefined || e.GROVE_PORT < 65535, { path: ['GROVE_PREVIEW_PORT'], error: 'GROVE_PORT is 65535: set GROVE_PREVIEW_PORT explicitly' })
    .refine((e) => e.GROVE_PREVIEW_PORT === undefined || e.GROVE_PREVIEW_PORT === 0 || e.GROVE_PREVIEW_PORT !== e.GROVE_PORT, {
      path: ['GROVE_PREVIEW_PORT'],
      error: 'GROVE_PREVIEW_PORT must differ from GROVE_PORT: previews need their own origin',
    })
    .safeParse(source);
  if (r.success) {
    const previewPort = r.data.GROVE_PREVIEW_PORT ?? (r.data.GROVE_PORT === 0 ? 0 : r.data.GROVE_PORT + 1);
    return { ...r.data, GROVE_HOME: path.resolve(r.data.GROVE_HOME), GROVE_PREVIEW_PORT: previewPort };
  }
  const lines = r.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`).join('\n');
  throw new Error(`invalid environment:\n${lines}`);
}
