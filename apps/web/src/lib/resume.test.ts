// The /resume picker: which workspaces, in which order, and the quoted last message.
import { describe, expect, it } from 'vitest';
import type { ThreadLine, Workspace } from '@grove/contracts';
import { isResumeCommand, lastMessage, matchesQuery, resumeCandidates } from './resume.ts';

const ws = (name: string, state: Workspace['state'], lastActivityAt: string | null, project = 'demo'): Workspace => ({
  slug: name === 'default' ? project : `${project}~${name}`,
  project,
  name,
  isDefault: name === 'default',
  branch: `grove/${name}`,
  baseRef: 'main',
  state,
  failureReason: null,
  agentSessionId: null,
  createdAt: '2026-01-01T00:00:00Z',
  updatedAt: '2026-01-01T00:00:00Z',
  lastActivityAt,
  queuePosition: null,
});

describe('resumeCandidates', () => {
  it('lists the project’s live workspaces, most recently active first', () => {
    const list = [
      ws('old', 'stopped', '2026-01-02T00:00:00Z'),
      ws('gone', 'gone', '2026-01-09T00:00:00Z'),
      ws('new', 'running', '2026-01-05T00:00:00Z'),
      ws('leaving', 'tearing-down', '2026-01-08T00:00:00Z'),
      ws('other', 'running', '2026-01-07T00:00:00Z', 'site'),
      ws('never', 'failed', null),
    ];
    expect(resumeCandidates(list, 'demo').map((w) => w.name)).toEqual(['new', 'old', 'never']);
    expect(resumeCandidates(list).map((w) => w.name)).toEqual(['other', 'new', 'old', 'never']);
  });

  it('filters by name, project or branch, ignoring case', () => {
    const w = ws('fix-login', 'running', null);
    expect(matchesQuery(w, 'LOGIN')).toBe(true);
    expect(matchesQuery(w, 'grove/fix')).toBe(true);
    expect(matchesQuery(w, 'nope')).toBe(false);
    expect(matchesQuery(w, '  ')).toBe(true);
  });
});

describe('commands and quotes', () => {
  it('recognises /resume typed alone', () => {
    expect(isResumeCommand(' /Resume\n')).toBe(true);
    expect(isResumeCommand('/resume now')).toBe(false);
  });

  it('quotes the last user or agent message on one line', () => {
    const at = '2026-01-01T00:00:00Z';
    const lines: ThreadLine[] = [
      { seq: 0, turn: 't1', at, kind: 'user', text: 'first' },
      { seq: 1, turn: 't1', at, kind: 'assistant', text: 'a\n\nlong   reply' },
      { seq: 2, turn: 't1', at, kind: 'turn_end', status: 'completed' },
    ];
    expect(lastMessage(lines)).toEqual({ who: 'agent', text: 'a long reply' });
    expect(lastMessage(lines, 6)).toEqual({ who: 'agent', text: 'a lon…' });
    expect(lastMessage([])).toBeNull();
  });
});
