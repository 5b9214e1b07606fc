// How a `grove` command ends: the exit codes scripts rely on, and which failure maps to which.
import { CommanderError } from 'commander';
import { ApiError } from './client.ts';

/** Exit codes scripts can rely on. */
export const EXIT = {
  ok: 0,
  error: 1,
  usage: 2,
  notFound: 3,
  capacity: 4,
  unreachable: 5,
  unauthorized: 6,
  /** 409 not_configured: the project has no forge or remote, or the server no GROVE_FORGE_TOKEN. */
  notConfigured: 7,
  /** Any other 409: it exists already, the workspace is in the wrong state, the remote refused the push. */
  conflict: 8,
  /** The project's remote or forge failed (unreachable, refused our credentials, answered an error). */
  remote: 9,
  cancelled: 130,
} as const;

/** Ends the command with this exit code; the message (if any) goes to stderr. */
export class Exit extends Error {
  constructor(
    readonly code: number,
    message = '',
  ) {
    super(message);
  }
}

export function exitCodeFor(e: unknown): number {
  if (e instanceof Exit) return e.code;
  if (e instanceof CommanderError) return e.exitCode === 0 ? EXIT.ok : EXIT.usage;
  if (e instanceof ApiError) {
    if (e.code === 'unreachable') return EXIT.unreachable;
    if (e.status === 401) return EXIT.unauthorized;
    if (e.status === 404) return EXIT.notFound;
    if (e.status === 429) return EXIT.capacity;
    if (e.status === 422) return EXIT.usage;
    if (e.code === 'not_configured') return EXIT.notConfigured;
    if (e.status === 409) return EXIT.conflict;
    if (e.code === 'remote_failed' || e.code === 'forge_failed') return EXIT.remote;
  }
  return EXIT.error;
}
