import { describe, expect, it } from 'vitest';
import type { Workspace } from '@grove/contracts';
import { pickLanding, projectNames } from './landing.ts';

function ws(slug: string, state: Workspace['state'] = 'running'): Workspace {
  const [project = '', name] = slug.split('~');
  const at = '2026-01-01T00:00:00.000Z';
  return { slug, project, name: name ?? 'default', isDefault: name === undefined, branch: 'grove/default', baseRef: 'main', state, failureReason: null, agentSessionId: null, createdAt: at, updatedAt: at, lastActivityAt: null, queuePosition: null };
}

describe('every project by name', () => {
  it("joins the list's names and those the workspaces name, once each, sorted; a list that could not be read adds none", () => {
    expect(projectNames(['zeta', 'app'], [ws('demo~feat'), ws('app')])).toEqual(['app', 'demo', 'zeta']);
    expect(projectNames(null, [ws('demo')])).toEqual(['demo']);
  });
});

describe('where / lands', () => {
  it('opens the asked project, else the first by name that has a conversation, never a fork', () => {
    const list = [ws('zeta'), ws('demo~feat'), ws('demo', 'stopped')];
    expect(pickLanding(list, ['app', 'demo', 'zeta'], null)).toEqual({ kind: 'found', workspace: ws('demo', 'stopped') });
    expect(pickLanding(list, ['app', 'demo', 'zeta'], 'zeta')).toEqual({ kind: 'found', workspace: ws('zeta') });
  });

  it('a project whose conversation has not begun (or was torn down) lands on its first message', () => {
    expect(pickLanding([ws('demo')], ['app', 'demo'], 'app')).toEqual({ kind: 'fresh', project: 'app' });
    expect(pickLanding([ws('app', 'gone'), ws('app~feat')], ['app'], null)).toEqual({ kind: 'fresh', project: 'app' });
    expect(pickLanding([ws('app', 'failed')], ['app'], 'app')).toEqual({ kind: 'fresh', project: 'app' });
    // Begun again after a failure: the live one, whatever order the list has them in.
    expect(pickLanding([ws('app', 'failed'), ws('app', 'creating')], ['app'], null)).toEqual({ kind: 'found', workspace: ws('app', 'creating') });
    // Named by a workspace only (the project list could not be read).
    expect(pickLanding([ws('app~feat')], null, null)).toEqual({ kind: 'fresh', project: 'app' });
  });

  it('says so for a project that does not exist or when there are none, and waits when it cannot tell', () => {
    expect(pickLanding([ws('demo')], ['demo'], 'nope')).toEqual({ kind: 'unknown', project: 'nope' });
    expect(pickLanding([], null, null)).toEqual({ kind: 'none' });
    // Read, and empty: no project is on its way (the demo is registered before the server listens).
    expect(pickLanding([], [], null)).toEqual({ kind: 'empty' });
  });
});
