// Turn-end notices: from events, kept only for workspaces not on screen, cleared when shown; badge and card texts;
// when a browser notification is due; the remembered opt-in.
import { describe, expect, it } from 'vitest';
import type { GroveEvent } from '@grove/contracts';
import {
  NOTIFY_KEY,
  badgeOf,
  clearShown,
  entryOf,
  loadNotifyPref,
  notificationOf,
  noteTurnEnded,
  parseNotifyPref,
  saveNotifyPref,
  shouldNotify,
  turnNoticeOf,
  type TurnNotice,
} from './notifications.ts';

const at = '2026-12-04T12:00:00.000Z';
const ev = (id: number, slug: string, data: Record<string, unknown>, type = 'turn.ended'): GroveEvent => ({ id, slug, type, data, at });
const ended = (id: number, slug: string, over: Record<string, unknown> = {}) =>
  ev(id, slug, { workspaceId: 1, turn: `turn-${id}`, outcome: 'completed', error: null, waitingForUser: true, shutdown: false, ...over });
const notice = (e: GroveEvent): TurnNotice => {
  const n = turnNoticeOf(e);
  if (!n) throw new Error('no notice');
  return n;
};

describe('turnNoticeOf', () => {
  it('reads each outcome of a turn.ended event', () => {
    expect(turnNoticeOf(ended(1, 'demo'))).toEqual({ slug: 'demo', turn: 'turn-1', kind: 'waits', error: null, at, id: 1 });
    expect(turnNoticeOf(ended(2, 'demo', { waitingForUser: false }))?.kind).toBe('done');
    expect(turnNoticeOf(ended(3, 'demo', { outcome: 'failed', error: 'boom', waitingForUser: false }))).toMatchObject({ kind: 'failed', error: 'boom' });
    expect(turnNoticeOf(ended(4, 'demo', { outcome: 'cancelled', waitingForUser: false, shutdown: true }))).toMatchObject({ kind: 'stopped', error: null });
  });

  it('ignores other events and turn.ended data that does not match the contract', () => {
    expect(turnNoticeOf(ev(1, 'demo', { turn: 'turn-1' }, 'turn.snapshot'))).toBeNull();
    expect(turnNoticeOf(ended(1, 'demo', { outcome: 'exploded' }))).toBeNull();
    expect(turnNoticeOf(ev(1, 'demo', { turn: 'turn-1', outcome: 'completed' }))).toBeNull();
  });
});

describe('notices', () => {
  it('keeps a turn end of a workspace off screen, not of the one shown, and never an older one over a newer', () => {
    const shown = new Set(['demo']);
    let s = noteTurnEnded({}, notice(ended(5, 'demo')), shown);
    expect(s).toEqual({});
    s = noteTurnEnded(s, notice(ended(6, 'demo~b', { outcome: 'failed', error: 'x', waitingForUser: false })), shown);
    expect(Object.keys(s)).toEqual(['demo~b']);
    const replay = noteTurnEnded(s, notice(ended(4, 'demo~b')), shown);
    expect(replay).toBe(s);
    s = noteTurnEnded(s, notice(ended(7, 'demo~b')), shown);
    expect(s['demo~b']?.kind).toBe('waits');
  });

  it('clears the notices of what is shown, and returns the same object when there is nothing to clear', () => {
    const s = noteTurnEnded(noteTurnEnded({}, notice(ended(1, 'a')), new Set()), notice(ended(2, 'b')), new Set());
    expect(clearShown(s, new Set(['c']))).toBe(s);
    expect(Object.keys(clearShown(s, new Set(['a', 'c'])))).toEqual(['b']);
  });
});

describe('texts', () => {
  const now = Date.parse(at) + 2 * 60_000;
  it('badges: glyph and accessible words per kind', () => {
    expect(badgeOf(notice(ended(1, 'a')))).toEqual({ glyph: '✓', label: 'Turn finished, waiting for you' });
    expect(badgeOf(notice(ended(1, 'a', { waitingForUser: false })))).toEqual({ glyph: '✓', label: 'Turn finished' });
    expect(badgeOf(notice(ended(1, 'a', { outcome: 'failed', error: 'Scripted failure.', waitingForUser: false })))).toEqual({ glyph: '!', label: 'Turn failed: Scripted failure.' });
    expect(badgeOf(notice(ended(1, 'a', { outcome: 'failed', waitingForUser: false }))).label).toBe('Turn failed');
    expect(badgeOf(notice(ended(1, 'a', { outcome: 'cancelled', waitingForUser: false }))).label).toBe('Turn stopped');
  });

  it('card entries say when, and the failure', () => {
    expect(entryOf(notice(ended(1, 'a')), now)).toBe('Finished 2 minutes ago, waiting for you');
    expect(entryOf(notice(ended(1, 'a', { outcome: 'failed', error: 'boom', waitingForUser: false })), Date.parse(at))).toBe('Failed just now: boom');
    expect(entryOf(notice(ended(1, 'a', { outcome: 'cancelled', waitingForUser: false })), now)).toBe('Stopped 2 minutes ago');
  });

  it('browser notifications name the workspace and replace an earlier one of the same workspace', () => {
    expect(notificationOf(notice(ended(1, 'demo~b')), 'b')).toEqual({ title: 'b: turn finished', body: 'The agent finished its turn and waits for you.', tag: 'grove-turn-demo~b' });
    expect(notificationOf(notice(ended(1, 'demo~b', { outcome: 'failed', error: 'boom', waitingForUser: false })), 'b')).toMatchObject({ title: 'b: turn failed', body: 'The turn failed: boom' });
  });
});

describe('shouldNotify', () => {
  const done = notice(ended(1, 'a'));
  const base = { enabled: true, permission: 'granted' as const, notice: done, shown: false, pageHidden: false };
  it('only when opted in, allowed, and the workspace is not in view', () => {
    expect(shouldNotify(base)).toBe(true);
    expect(shouldNotify({ ...base, enabled: false })).toBe(false);
    expect(shouldNotify({ ...base, permission: 'default' })).toBe(false);
    expect(shouldNotify({ ...base, permission: 'denied' })).toBe(false);
    expect(shouldNotify({ ...base, shown: true })).toBe(false);
    // On screen but the browser tab is in the background: the user does not see it either.
    expect(shouldNotify({ ...base, shown: true, pageHidden: true })).toBe(true);
    expect(shouldNotify({ ...base, notice: notice(ended(2, 'a', { outcome: 'cancelled', waitingForUser: false })) })).toBe(false);
  });
});

describe('the opt-in', () => {
  it('is off unless stored as on, and survives a storage that throws', () => {
    expect(parseNotifyPref(null)).toBe(false);
    expect(parseNotifyPref('true')).toBe(false);
    expect(parseNotifyPref('on')).toBe(true);
    const map = new Map<string, string>();
    const storage = { getItem: (k: string) => map.get(k) ?? null, setItem: (k: string, v: string) => void map.set(k, v) };
    expect(loadNotifyPref(storage)).toBe(false);
    saveNotifyPref(storage, true);
    expect(map.get(NOTIFY_KEY)).toBe('on');
    expect(loadNotifyPref(storage)).toBe(true);
    saveNotifyPref(storage, false);
    expect(loadNotifyPref(storage)).toBe(false);
    const broken = {
      getItem: () => {
        throw new Error('denied');
      },
      setItem: () => {
        throw new Error('denied');
      },
    };
    expect(loadNotifyPref(broken)).toBe(false);
    expect(() => saveNotifyPref(broken, true)).not.toThrow();
    expect(loadNotifyPref(null)).toBe(false);
  });
});
