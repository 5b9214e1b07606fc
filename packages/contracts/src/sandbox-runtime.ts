import { z } from 'zod';

/**
 * The OCI runtime a workspace's sandbox runs on (GROVE_RUNTIME): `runc`, the engine's ordinary one (the host kernel
 * behind namespaces and seccomp), or `runsc`, gVisor's user-space kernel between the agent and the host.
 */
export const sandboxRuntimeSchema = z.enum(['runc', 'runsc']);
export type SandboxRuntime = z.infer<typeof sandboxRuntimeSchema>;
