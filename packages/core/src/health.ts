// The host's calls to a backend over its Unix socket live with the runtime (@grove/runtime); core uses them on the
// socket path of a started workspace.
export { getOverSocket, overSocket, probeHealth } from '@grove/runtime';
export type { HealthProbe } from '@grove/runtime';
