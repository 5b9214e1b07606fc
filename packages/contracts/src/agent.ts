import { z } from 'zod';
import { egressPolicySchema } from './egress.ts';
import { forgeConfigSchema, gitSettingsSchema, overlayConfigSchema } from './git-flow.ts';

/**
 * Agents and the per-project configuration (docs/agents.md). The host validates a project's config
 * when the project is added and before every fork or start, and hands the `agent` part to the
 * sandbox's backend as JSON in GROVE_AGENT_CONFIG, which validates it again with the same schema.
 * Nothing here may hold a secret: the config ends up in the container's environment.
 */

/** Providers the backend knows; anything else is refused when the project is configured. */
export const AGENT_PROVIDERS = ['scripted', 'claude', 'command'] as const;
export type AgentProviderName = (typeof AGENT_PROVIDERS)[number];

/** One message an empty conversation offers to send, and what it makes the agent do. */
export interface AgentExample {
  message: string;
  does: string;
}

/**
 * What the empty conversation says each provider can do (the web app shows it). The only copy of this text:
 * the backend's providers implement the commands, they do not describe them to users.
 */
export const AGENT_GUIDES: Record<AgentProviderName, { summary: string; examples: readonly AgentExample[] }> = {
  scripted: {
    summary: 'This workspace runs the scripted agent, a stand-in for demos and tests. It understands these messages and echoes anything else:',
    examples: [
      { message: 'write notes.txt Hello from the agent', does: 'writes a file in the workspace' },
      { message: 'sleep 3000', does: 'takes 3 s, streaming its reply' },
      { message: 'fail', does: 'fails the turn, to see an error' },
      { message: 'hello', does: 'echoes it back' },
    ],
  },
  claude: {
    summary: 'This workspace runs Claude Code: ask it to read, change or run anything in the workspace, and it tells you what it did.',
    examples: [],
  },
  command: {
    summary: 'This workspace runs the project’s own agent command: each message goes to it, and what it prints comes back here.',
    examples: [],
  },
};

/** The guide of a provider named by a backend (GET /status), or null for a name this Grove does not know. */
export function agentGuideOf(provider: string): (typeof AGENT_GUIDES)[AgentProviderName] | null {
  return (AGENT_PROVIDERS as readonly string[]).includes(provider) ? AGENT_GUIDES[provider as AgentProviderName] : null;
}

/** Where `{message}` appears in a command agent's argv, the user's message goes. */
export const MESSAGE_PLACEHOLDER = '{message}';

/** Inside the sandbox the backend relays this loopback port to the host's provider relay (/run/grove/provider.sock). */
export const PROVIDER_RELAY_PORT = 3129;

/** Stands in for the API key inside the sandbox; the host's relay replaces it with the real one. */
export const PLACEHOLDER_API_KEY = 'grove-placeholder-key';

// Names that usually carry credentials. A project config lands in the container's environment, so
// such a variable would put the secret inside the sandbox; the provider relay adds keys on the host.
const SECRET_NAME = /(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$/i;
// The backend's own variables and the ones the providers set are not the agent config's to change.
const RESERVED_NAME = /^(GROVE_|ANTHROPIC_BASE_URL$|HOME$|PATH$|CLAUDE_CONFIG_DIR$)/;

// Names are checked after the record (not as its key schema), so each refusal says why rather
// than zod's generic "Invalid key in record".
const envSchema = z.record(z.string(), z.string().max(4096)).superRefine((env, ctx) => {
  const names = Object.keys(env);
  if (names.length > 64) ctx.addIssue({ code: 'custom', message: 'at most 64 environment variables' });
  for (const name of names) {
    const why = !/^[A-Za-z_][A-Za-z0-9_]{0,127}$/.test(name)
      ? 'environment variable names are letters, digits and _, not starting with a digit'
      : RESERVED_NAME.test(name)
        ? 'GROVE_*, ANTHROPIC_BASE_URL, HOME, PATH and CLAUDE_CONFIG_DIR are set by Grove'
        : SECRET_NAME.test(name)
          ? 'secrets never go into a sandbox (this variable name looks like one); the host relay adds the provider key'
          : null;
    if (why) ctx.addIssue({ code: 'custom', message: why, path: [name] });
  }
});

export const scriptedAgentSchema = z.object({ provider: z.literal('scripted') }).strict();

export const claudeAgentSchema = z
  .object({
    provider: z.literal('claude'),
    /** --model; default: the CLI's own default. */
    model: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._:[\]-]{0,99}$/, { error: 'model is a model name or alias (letters, digits, . _ : - [ ])' })
      .optional(),
    /**
     * --permission-mode. The sandbox is the boundary, so the agent may act without asking by
     * default; nobody could answer a prompt in -p mode anyway.
     */
    permissionMode: z.enum(['bypassPermissions', 'acceptEdits', 'dontAsk', 'plan']).default('bypassPermissions'),
    /** More environment for the CLI (never secrets). */
    env: envSchema.default({}),
  })
  .strict();

export const commandAgentSchema = z
  .object({
    provider: z.literal('command'),
    /** The program and its arguments; `{message}` in any of them is replaced by the user's message. */
    argv: z
      .array(z.string().min(1, { error: 'argv entries must not be empty' }).max(4096))
      .min(1, { error: 'argv needs at least the program to run' })
      .max(64),
    /** `argument`: the message replaces `{message}` in argv; `stdin`: it is written to the program's stdin. */
    input: z.enum(['argument', 'stdin']).default('argument'),
    env: envSchema.default({}),
    /** Relay 127.0.0.1:3129 in the sandbox to the host's provider relay, for agents that speak the Anthropic API. */
    providerRelay: z.boolean().default(false),
    /** A turn taking longer is cancelled (SIGINT, then SIGKILL). Default: no limit. */
    timeoutMs: z.number().int().min(1000).max(24 * 3600 * 1000).optional(),
  })
  .strict()
  .refine((c) => c.input !== 'argument' || c.argv.slice(1).some((a) => a.includes(MESSAGE_PLACEHOLDER)), {
    error: `with input "argument", one of argv's arguments must contain ${MESSAGE_PLACEHOLDER}`,
    path: ['argv'],
  })
  .refine((c) => !c.argv[0]?.includes(MESSAGE_PLACEHOLDER), { error: `the program (argv[0]) must not be ${MESSAGE_PLACEHOLDER}`, path: ['argv', 0] });

export const agentConfigSchema = z.discriminatedUnion('provider', [scriptedAgentSchema, claudeAgentSchema, commandAgentSchema], {
  error: (issue) => (issue.code === 'invalid_union' ? `unknown agent provider; this Grove knows: ${AGENT_PROVIDERS.join(', ')}` : undefined),
});
export type AgentConfig = z.infer<typeof agentConfigSchema>;
/** What a config file or API body may say (defaults not yet applied). */
export type AgentConfigInput = z.input<typeof agentConfigSchema>;
export type ClaudeAgentConfig = z.infer<typeof claudeAgentSchema>;
export type CommandAgentConfig = z.infer<typeof commandAgentSchema>;

/**
 * A glob relative to the worktree root: `*` and `?` stay within one path segment, `**` spans any
 * number of them, a trailing `/` means everything below that directory.
 */
export const pathGlobSchema = z
  .string()
  .min(1, { error: 'a path glob must not be empty' })
  .max(512)
  .refine((g) => !g.startsWith('/'), { error: 'path globs are relative to the workspace root (no leading /)' })
  .refine((g) => !g.split('/').includes('..'), { error: 'path globs must not contain ".."' })
  // eslint-disable-next-line no-control-regex
  .refine((g) => !/[\x00-\x1f]/.test(g), { error: 'path globs must not contain control characters' });

/** `<home>/config/<project>.json`. Every field is optional: an empty object is the defaults. */
export const projectConfigSchema = z
  .object({
    /** The agent of this project's workspaces; default: the server's GROVE_PROVIDER (scripted). */
    agent: agentConfigSchema.optional(),
    /**
     * Where agents may change files. After every turn, changes outside these globs are reverted
     * (tracked files restored from the branch, new files removed). Absent: everywhere.
     */
    allowedPaths: z.array(pathGlobSchema).min(1, { error: 'allowedPaths needs at least one glob (leave it out to allow everything)' }).max(256).optional(),
    /**
     * The egress policy every workspace of the project starts from (added to the server's
     * defaults), e.g. a package registry. The agent provider needs no rule: it is reached through
     * the credential relay, never through the gate.
     */
    egress: egressPolicySchema.optional(),
    /** Author and committer of host checkpoints (default Grove <grove@localhost>), checkpoints after turns (docs/git-flow.md). */
    git: gitSettingsSchema.optional(),
    /** Where publish opens pull requests; absent: publish is refused with a hint. No token here, ever. */
    forge: forgeConfigSchema.optional(),
    /**
     * Keep a workspace (container, worktree) when its pull request is merged or closed; default false: the
     * pull-request watcher tears it down (the branch is kept) and records workspace.cleaned.
     */
    keepCheckoutOnClose: z.boolean().optional(),
    /**
     * The user's local files (not in git) each workspace gets: read-only mounts, or copies for `writable` ones.
     * Never in a commit. Absent: DEFAULT_OVERLAY_FILES, all read-only (docs/git-flow.md).
     */
    overlay: overlayConfigSchema.optional(),
  })
  .strict();
export type ProjectConfig = z.infer<typeof projectConfigSchema>;
export type ProjectConfigInput = z.input<typeof projectConfigSchema>;

const shape = projectConfigSchema.shape;
/**
 * PATCH /api/projects/:project/config: each key given replaces the stored one, `null` removes it (back to its
 * default), keys not given stay as stored. Unlike PUT, nothing else is rewritten: no defaults get frozen into
 * the file, and two changes of different keys at once both land.
 */
export const projectConfigPatchSchema = z
  .object({
    agent: shape.agent.unwrap().nullable().optional(),
    allowedPaths: shape.allowedPaths.unwrap().nullable().optional(),
    egress: shape.egress.unwrap().nullable().optional(),
    git: shape.git.unwrap().nullable().optional(),
    forge: shape.forge.unwrap().nullable().optional(),
    keepCheckoutOnClose: shape.keepCheckoutOnClose.unwrap().nullable().optional(),
    overlay: shape.overlay.unwrap().nullable().optional(),
  })
  .strict();
export type ProjectConfigPatch = z.input<typeof projectConfigPatchSchema>;

/** GET, PUT and PATCH /api/projects/:project/config. */
export const projectConfigResponseSchema = z.object({ config: projectConfigSchema });
export type ProjectConfigResponse = z.infer<typeof projectConfigResponseSchema>;
