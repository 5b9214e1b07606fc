// Test helpers for running the sandbox tests on either runtime (runc, or runsc: gVisor). Not part of the public entry:
// test files import this file directly. It reads no environment; each test file passes GROVE_TEST_RUNTIME in.
import { sandboxRuntimeSchema } from '@grove/contracts';
import type { SandboxRuntime } from '@grove/contracts';
import { SANDBOX_GID, SANDBOX_UID } from './types.ts';

/** The runtime a test run asks for (`npm test` runs the sandbox, egress and isolation tests once on each). */
export function testRuntime(value: string | undefined): SandboxRuntime {
  return sandboxRuntimeSchema.parse(value ?? 'runc');
}

/**
 * The `docker` argv that runs cmd in a container as the agent (uid 1000; the container's own user is the backend's).
 * Under gVisor a process `docker exec -u 1000:1000` starts may signal root's processes (the sandbox's exec path, not
 * how Grove starts anything), so there the agent's stand-in is made the way the backend makes every agent process:
 * a root process that drops to 1000 and every capability before exec.
 */
export function agentExecArgs(
  container: string,
  cmd: string[],
  o: { runtime: SandboxRuntime; detach?: boolean; interactive?: boolean },
): string[] {
  const flags = [...(o.detach ? ['-d'] : []), ...(o.interactive ? ['-i'] : [])];
  if (o.runtime === 'runc') return ['exec', ...flags, '-u', `${SANDBOX_UID}:${SANDBOX_GID}`, container, ...cmd];
  const drop = ['setpriv', `--reuid=${SANDBOX_UID}`, `--regid=${SANDBOX_GID}`, '--clear-groups', '--inh-caps=-all', '--'];
  return ['exec', ...flags, '-u', '0:0', container, ...drop, ...cmd];
}

/**
 * A shell command listing a directory's entries, one a line. Debian bookworm's runsc (release 20221219) answers
 * coreutils' statx (it passes AT_NO_AUTOMOUNT) with EINVAL, so `ls` fails there on any path; find reads the same
 * directory without statx.
 */
export function listCommand(dir: string, runtime: SandboxRuntime): string {
  return runtime === 'runc' ? `ls -A ${dir}` : `find ${dir} -mindepth 1 -maxdepth 1 -printf '%f\\n'`;
}

/**
 * What a write the mounts refuse says. runc checks a read-only mount before permissions; gVisor checks permissions
 * first, so a file or dir the agent does not own reads "permission denied" there: refused all the same.
 */
export function readOnlyMessage(runtime: SandboxRuntime): RegExp {
  // git words EACCES on an object dir that happens to exist already as "insufficient permission".
  return runtime === 'runc' ? /read-only file system/i : /read-only file system|permission denied|insufficient permission/i;
}
