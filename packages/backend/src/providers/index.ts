import { GroveError, PROVIDER_RELAY_PORT, claudeAgentSchema } from '@grove/contracts';
import type { AgentConfig } from '@grove/contracts';
import type { Logger } from '../logger.ts';
import { createClaudeProvider } from './claude.ts';
import { createCommandProvider } from './command.ts';
import { createScriptedProvider } from './scripted.ts';
import type { AgentUser, Provider, ProviderName } from './types.ts';

export interface ProviderDeps {
  scriptedDelayMs: number;
  /** The project's agent config (GROVE_AGENT_CONFIG); required for `command`, optional for the others. */
  agent?: AgentConfig;
  /** The thread dir: the claude provider keeps its session id there. */
  threadDir: string;
  /** The environment agent CLIs inherit. */
  baseEnv?: Record<string, string>;
  /** The in-sandbox relay to the host's provider relay, e.g. http://127.0.0.1:3129. */
  relayUrl?: string;
  /** The claude executable (tests use a fake). */
  claudeBinary?: string;
  /** SIGINT -> SIGKILL delay when a turn is cancelled. */
  graceMs?: number;
  /** The sandbox's agent user: every agent process, and every file written for the agent, runs as it. */
  agentUser?: AgentUser | null;
  logger?: Logger;
}

export function createProvider(name: ProviderName, deps: ProviderDeps): Provider {
  const agent = deps.agent;
  if (agent !== undefined && agent.provider !== name) {
    throw new GroveError('invalid_input', `GROVE_PROVIDER is "${name}" but GROVE_AGENT_CONFIG configures "${agent.provider}"`);
  }
  const baseEnv = deps.baseEnv ?? {};
  switch (name) {
    case 'scripted':
      return createScriptedProvider({ delayMs: deps.scriptedDelayMs, user: deps.agentUser ?? null });
    case 'claude':
      return createClaudeProvider({
        config: agent?.provider === 'claude' ? agent : claudeAgentSchema.parse({ provider: 'claude' }),
        threadDir: deps.threadDir,
        baseUrl: deps.relayUrl ?? `http://127.0.0.1:${PROVIDER_RELAY_PORT}`,
        baseEnv,
        binary: deps.claudeBinary,
        graceMs: deps.graceMs,
        user: deps.agentUser ?? null,
        logger: deps.logger,
      });
    case 'command':
      if (agent?.provider !== 'command') throw new GroveError('invalid_input', 'the command provider needs its argv: set GROVE_AGENT_CONFIG (the project config\'s "agent")');
      return createCommandProvider({ config: agent, baseEnv, relayUrl: deps.relayUrl, graceMs: deps.graceMs, user: deps.agentUser ?? null, logger: deps.logger });
  }
}
