// @grove/runtime: the WorkspaceRuntime seam (where a workspace runs: sandbox, egress gate, host sockets, readiness) and its Docker implementation.
export type { Readiness, RuntimeEvent, RuntimeHub, StartOptions, StartStep, StartedWorkspace, WarmSpec, WorkspaceLimits, WorkspaceRuntime, WorkspaceSpec, WorkspaceStatus } from './types.ts';
export { createDockerRuntime, exitSummary } from './docker.ts';
export type { DockerRuntimeOptions } from './docker.ts';
export { PROXY_ENV, PROXY_URL } from './egress-gates.ts';
export type { EgressGateOptions } from './egress-gates.ts';
export { getOverSocket, overSocket, probeHealth } from './health.ts';
export type { HealthProbe } from './health.ts';
export { verifyBackendSocket, verifyBackendSocketSync } from './backend-socket.ts';
export type { SocketIdentity } from './backend-socket.ts';
// The workspace's side of the host's files: who owns what the sandbox writes, and where it sees it.
export { BACKEND_GID, BACKEND_UID, SANDBOX_GID, SANDBOX_PATHS, SANDBOX_UID } from '@grove/sandbox';
