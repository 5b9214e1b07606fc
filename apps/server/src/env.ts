// The server's configuration: the only place that reads process.env, checked with zod at start.
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

/** Per-sandbox memory limit; the default cap is what half the host's memory allows at that limit, at most 8. */
export const SANDBOX_MEMORY_BYTES = 512 * 1024 * 1024;

export function defaultMaxRunning(totalMemBytes = os.totalmem()): number {
  return Math.max(1, Math.min(8, Math.floor((totalMemBytes * 0.5) / SANDBOX_MEMORY_BYTES)));
}

const bool = z
  .enum(['1', '0', 'true', 'false', 'yes', 'no'])
  .transform((v) => v === '1' || v === 'true' || v === 'yes');

const here = path.dirname(fileURLToPath(import.meta.url));

export const envSchema = z.object({
  GROVE_HOME: z.string().min(1).default(path.join(os.homedir(), '.grove')),
  GROVE_PORT: z.coerce.number().int().min(0).max(65535).default(4300),
  GROVE_HOST: z.string().min(1).default('127.0.0.1'),
  GROVE_TOKEN: z.string().min(16, { error: 'GROVE_TOKEN must be at least 16 characters' }).optional(),
  GROVE_MAX_RUNNING: z.coerce.number().int().min(1).max(256).default(defaultMaxRunning()),
  GROVE_IMAGE: z.string().min(1).default('grove-sandbox:latest'),
  /** Register the bundled demo project (and its default workspace) at start. */
  GROVE_DEMO: bool.default(true),
  GROVE_DOCKER_SOCKET: z.string().optional(),
  GROVE_HEALTH_TIMEOUT_MS: z.coerce.number().int().min(100).default(30_000),
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

export type Env = z.infer<typeof envSchema>;

export function loadEnv(source: Record<string, string | undefined> = process.env): Env {
  const r = envSchema.safeParse(source);
  if (r.success) return { ...r.data, GROVE_HOME: path.resolve(r.data.GROVE_HOME) };
  const lines = r.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`).join('\n');
  throw new Error(`invalid environment:\n${lines}`);
}
