// Which exit code each failure ends the CLI with: scripts tell a missing configuration from a conflict and a failed remote.
import { describe, expect, it } from 'vitest';
import { ApiError } from './client.ts';
import { EXIT, exitCodeFor } from './main.ts';

describe('exitCodeFor', () => {
  it('maps the API errors of checkpoint, publish and project add to their own codes', () => {
    expect(exitCodeFor(new ApiError(409, 'not_configured', 'no forge', { missing: 'forge' }))).toBe(EXIT.notConfigured);
    expect(exitCodeFor(new ApiError(409, 'push_rejected', 'non-fast-forward'))).toBe(EXIT.conflict);
    expect(exitCodeFor(new ApiError(409, 'project_exists', 'taken'))).toBe(EXIT.conflict);
    expect(exitCodeFor(new ApiError(409, 'invalid_state', 'nothing to publish'))).toBe(EXIT.conflict);
    expect(exitCodeFor(new ApiError(502, 'remote_failed', 'unreachable'))).toBe(EXIT.remote);
    expect(exitCodeFor(new ApiError(502, 'forge_failed', 'forge down'))).toBe(EXIT.remote);
  });

  it('keeps the codes scripts already rely on', () => {
    expect(exitCodeFor(new ApiError(0, 'unreachable', 'down'))).toBe(EXIT.unreachable);
    expect(exitCodeFor(new ApiError(404, 'workspace_not_found', 'no'))).toBe(EXIT.notFound);
    expect(exitCodeFor(new ApiError(429, 'capacity_reached', 'full'))).toBe(EXIT.capacity);
    expect(exitCodeFor(new ApiError(422, 'invalid_input', 'bad'))).toBe(EXIT.usage);
    expect(exitCodeFor(new ApiError(502, 'backend_unavailable', 'no backend'))).toBe(EXIT.error);
    expect(exitCodeFor(new Error('boom'))).toBe(EXIT.error);
    expect(new Set(Object.values(EXIT)).size).toBe(Object.values(EXIT).length);
  });
});
