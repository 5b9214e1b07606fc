// The Changes panel's text and the explanations of publish errors.
import { describe, expect, it } from 'vitest';
import type { GroveEvent } from '@grove/contracts';
import { aheadBehind, changesSummary, explainGitError, refreshesChanges } from './git-changes.ts';

const ev = (slug: string, type: string): GroveEvent => ({ id: 1, slug, type, data: {}, at: '2026-01-01T00:00:00.000Z' });

describe('changes summary', () => {
  it('counts files and lines, binaries as no lines', () => {
    expect(
      changesSummary({
        files: [
          { path: 'a', status: 'M', additions: 3, deletions: 1 },
          { path: 'b.png', status: 'A', additions: null, deletions: null },
        ],
      }),
    ).toBe('2 files changed, +3 −1');
    expect(changesSummary({ files: [] })).toBe('No changes');
    expect(aheadBehind({ ahead: 1, behind: 4, defaultBranch: 'main' })).toBe('1 commit ahead of main, 4 behind');
  });

  it("reads the diff again on this workspace's file and publish events only", () => {
    expect(refreshesChanges(ev('app~x', 'workspace.checkpoint'), 'app~x')).toBe(true);
    expect(refreshesChanges(ev('app~x', 'turn.snapshot'), 'app~x')).toBe(true);
    expect(refreshesChanges(ev('app~y', 'workspace.checkpoint'), 'app~x')).toBe(false);
    expect(refreshesChanges(ev('app~x', 'egress.denied'), 'app~x')).toBe(false);
  });
});

describe('explainGitError', () => {
  const e = (code: string, body: Record<string, unknown> = {}) => ({ code, message: `server says ${code}`, body });

  it('says what is missing and how to add it', () => {
    const forge = explainGitError(e('not_configured', { missing: 'forge' }), 'app');
    expect(forge.title).toMatch(/no forge/);
    expect(forge.fix).toContain('PUT /api/projects/app/config');
    expect(forge.detail).toBe('server says not_configured');
    expect(explainGitError(e('not_configured', { missing: 'token' }), 'app').fix).toContain('GROVE_FORGE_TOKEN');
    expect(explainGitError(e('not_configured', { missing: 'remote' }), 'app').title).toMatch(/no remote/);
  });

  it('tells a rejected push from a failed remote and a failed forge', () => {
    expect(explainGitError(e('push_rejected', { reason: 'non_fast_forward' }), 'app').title).toMatch(/nothing was overwritten/);
    expect(explainGitError(e('push_rejected', { reason: 'remote_rejected' }), 'app').title).toMatch(/protected branch/);
    expect(explainGitError(e('remote_failed', { reason: 'auth' }), 'app').title).toMatch(/credentials/);
    expect(explainGitError(e('remote_failed', { reason: 'unreachable' }), 'app').title).toMatch(/could not be reached/);
    expect(explainGitError(e('forge_failed', { reason: 'not_found' }), 'app').fix).toContain('forge.owner');
    expect(explainGitError(e('forge_failed', { reason: 'unreachable' }), 'app').title).toMatch(/nothing was left half-published/);
  });
});
