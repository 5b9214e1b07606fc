// @grove/core: the workspace registry, lifecycle state machine, git worktrees, repo locks, name/path guards and audit events.
export { createGrove, DEFAULT_LIMITS } from './grove.ts';
export type { AddProjectOptions, Grove, GroveOptions } from './types.ts';
export { defaultPolicy } from './egress.ts';
export { PROXY_ENV } from '@grove/runtime';
export { verifyBackendSocket, verifyBackendSocketSync } from '@grove/runtime';
export type { EgressOptions } from './egress.ts';
export type { WatchResult } from './git-flow.ts';
