// The /resume picker: which workspaces, in which order, and the quoted last message.
import { describe, expect, it } from 'vitest';
import type { Workspace } from '@grove/contracts';
import { isResumeCommand, quoteLine, quoteOf, matchesQuery, resumeCandidates } from './resume.ts';

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

  it('quotes the last message on one line, shortened', () => {
    expect(quoteOf({ who: 'agent', text: 'a\n\nlong   reply' })).toEqual({ who: 'agent', text: 'a long reply' });
    expect(quoteOf({ who: 'user', text: 'a long reply' }, 6)).toEqual({ who: 'user', text: 'a lon…' });
    expect(quoteLine({ who: 'user', text: 'fix it' })).toBe('You: fix it');
    expect(quoteLine({ who: 'agent', text: 'done' })).toBe('Agent: done');
    expect(quoteOf({ who: 'user', text: ' \n ' })).toBeNull();
    expect(quoteOf(null)).toBeNull();
  });
});
