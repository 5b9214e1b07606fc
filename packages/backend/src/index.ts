// @grove/backend: the process inside each sandbox: thread store, agent providers, HTTP + WebSocket on a Unix socket.
export { createBackend } from './backend.ts';
export type { Backend, BackendOptions } from './backend.ts';
export { readEnv, ENV_DEFAULTS } from './env.ts';
export { createEgressRelay } from './egress-relay.ts';
export type { EgressRelay, EgressRelayOptions } from './egress-relay.ts';
export type { BackendEnv } from './env.ts';
export { createLogger, silentLogger } from './logger.ts';
export type { Logger, LogLevel } from './logger.ts';
export { openThreadStore, THREAD_FILE } from './thread-store.ts';
export type { ThreadStore } from './thread-store.ts';
export { PROVIDER_NAMES } from './providers/types.ts';
export type { Provider, ProviderName, ProviderLine, TurnContext, TurnOutcome } from './providers/types.ts';
