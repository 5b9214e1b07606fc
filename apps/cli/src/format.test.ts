// The CLI's text helpers: tables, relative times, URLs, resume order.
import { describe, expect, it } from 'vitest';
import type { Workspace } from '@grove/contracts';
import { ago, diffHeadline, diffStat, oneLine, prCell, printable, quote, resumeCandidates, resumeTable, table, workspaceUrl } from './format.ts';

const now = Date.parse('2026-01-10T12:00:00.000Z');
function ws(slug: string, state: Workspace['state'], lastActivityAt: string | null, updatedAt = '2026-01-01T00:00:00.000Z'): Workspace {
  const [project = 'demo', name = 'default'] = slug.split('~');
  return { slug, project, name, isDefault: !slug.includes('~'), branch: `grove/${name}`, baseRef: 'main', state, failureReason: null, agentSessionId: null, createdAt: updatedAt, updatedAt, lastActivityAt, queuePosition: null };
}

describe('table', () => {
  it('pads columns to the widest cell and trims the end of each line', () => {
    expect(table([['A', 'BB', 'C'], ['long', 'x', '']])).toBe('A     BB  C\nlong  x');
    expect(table([])).toBe('');
  });
});

describe('oneLine / quote / ago', () => {
  it('flattens and shortens', () => {
    expect(oneLine(' a\n\n b  c ', 10)).toBe('a b c');
    expect(oneLine('abcdefghij', 5)).toBe('abcd…');
    expect(quote({ who: 'agent', text: 'all green', at: '' }, 40)).toBe('agent: all green');
    expect(quote(null, 40)).toBe('-');
  });
  it("never passes an agent's escape sequences to the terminal", () => {
    // OSC 52 (set the clipboard), a window title, a colour, a bell, a C1 CSI: printed as text, never acted on.
    const hostile = 'ok\u001b]52;c;ZWNobyBwd25lZA==\u0007 \u001b]0;title\u001b\\ \u001b[31mred\u001b[0m\r\u009b2J';
    const line = quote({ who: 'agent', text: hostile, at: '' }, 200);
    expect([...line].filter((c) => c.charCodeAt(0) < 0x20 || (c.charCodeAt(0) >= 0x7f && c.charCodeAt(0) <= 0x9f))).toEqual([]);
    expect(line).toContain('red');
    expect(printable('two\nlines\tkept\u001b[2J')).toBe('two\nlines\tkept [2J');
  });
  it('says how long ago', () => {
    expect(ago(null, now)).toBe('-');
    expect(ago('garbage', now)).toBe('-');
    expect(ago('2026-01-10T11:59:30.000Z', now)).toBe('just now');
    expect(ago('2026-01-10T11:55:00.000Z', now)).toBe('5m ago');
    expect(ago('2026-01-10T09:00:00.000Z', now)).toBe('3h ago');
    expect(ago('2026-01-08T12:00:00.000Z', now)).toBe('2d ago');
    expect(ago('2026-01-11T00:00:00.000Z', now)).toBe('just now');
  });
});

describe('workspaceUrl', () => {
  it('is the dashboard route of the workspace, escaped', () => {
    expect(workspaceUrl('http://localhost:4300', ws('demo~fix-1', 'running', null))).toBe('http://localhost:4300/p/demo/w/fix-1');
    expect(workspaceUrl('http://h', ws('demo', 'running', null))).toBe('http://h/p/demo/w/default');
  });
});

describe('resumeCandidates / resumeTable', () => {
  it('drops gone and tearing-down workspaces and puts the most recently active first', () => {
    const list = [
      ws('demo~old', 'stopped', '2026-01-02T00:00:00.000Z'),
      ws('demo~gone', 'gone', '2026-01-09T00:00:00.000Z'),
      ws('demo~new', 'running', '2026-01-09T00:00:00.000Z'),
      ws('demo~never', 'stopped', null),
      ws('demo~bye', 'tearing-down', '2026-01-09T00:00:00.000Z'),
    ];
    expect(resumeCandidates(list).map((w) => w.slug)).toEqual(['demo~new', 'demo~old', 'demo~never']);
  });
  it('prints number, slug, state, activity and the quoted last message', () => {
    const text = resumeTable(
      [
        { workspace: ws('demo~a', 'running', '2026-01-10T11:00:00.000Z'), lastMessage: { who: 'user', text: 'fix\nit', at: '' } },
        { workspace: ws('demo~b', 'stopped', null), lastMessage: null },
      ],
      now,
    );
    expect(text.split('\n')).toEqual([
      '#  SLUG    STATE    LAST ACTIVITY  LAST MESSAGE',
      '1  demo~a  running  1h ago         user: fix it',
      '2  demo~b  stopped  -              -',
    ]);
  });
});

describe('pull request and diff text', () => {
  it('shows the PR as number and state, "-" without one', () => {
    expect(prCell({ url: 'https://forge.test/team/app/pulls/12', number: 12, state: 'merged' })).toBe('#12 merged');
    expect(prCell(null)).toBe('-');
    expect(prCell(undefined)).toBe('-');
  });

  it('says where the branch stands and whether work is not checkpointed', () => {
    const files = [{ path: 'a.txt', status: 'A' as const, additions: 2, deletions: 0 }];
    expect(diffHeadline({ branch: 'grove/x', defaultBranch: 'main', ahead: 1, behind: 3, uncommitted: true, files })).toBe(
      'grove/x: 1 commit ahead of main, 3 commits behind; 1 file changed (some not checkpointed yet)',
    );
    expect(diffHeadline({ branch: 'grove/x', defaultBranch: 'main', ahead: 0, behind: 0, uncommitted: false, files: [] })).toBe('grove/x: 0 commits ahead of main, 0 commits behind; 0 files changed');
  });

  it('lists files with their counts, renames and binaries, and the totals', () => {
    const stat = diffStat([
      { path: 'src/app.ts', status: 'M', additions: 10, deletions: 3 },
      { path: 'logo.png', status: 'A', additions: null, deletions: null },
      { path: 'new.md', from: 'old.md', status: 'R', additions: 1, deletions: 1 },
    ]);
    expect(stat.split('\n')).toEqual(['M  +10  -3  src/app.ts', 'A  bin      logo.png', 'R  +1   -1  old.md -> new.md', '3 files, +11 -4']);
    expect(diffStat([])).toBe('No changes against the fork point.');
  });
});
