// A pull request's head in words, and the fallback event of the right workspace.
import { describe, expect, it } from 'vitest';
import type { GroveEvent } from '@grove/contracts';
import { baseFallbackOf, baseLabel, fallbackSentence } from './base.ts';

let id = 0;
const ev = (type: string, data: Record<string, unknown>, at: string): GroveEvent => ({ id: ++id, slug: 'app~review', type, data, at });
const fallback = (reason: string, at: string) => ev('workspace.base_fallback', { workspaceId: 3, wanted: 'pull request #7', base: 'main', reason }, at);

describe('baseLabel', () => {
  it('names a pull request head and leaves every other ref alone', () => {
    expect(baseLabel('refs/grove-pr/7/head')).toBe('pull request #7');
    expect(baseLabel('main')).toBe('main');
    expect(baseLabel('grove/feat')).toBe('grove/feat');
    expect(baseLabel('refs/grove-pr/x/head')).toBe('refs/grove-pr/x/head');
  });
});

describe('baseFallbackOf', () => {
  it('says where the fork started instead and why, newest first', () => {
    const events = [ev('workspace.reserved', { op: 'fork' }, '2026-01-01T00:00:00.000Z'), fallback('first', '2026-01-01T00:00:01.000Z'), fallback('second', '2026-01-01T00:00:02.000Z')];
    const f = baseFallbackOf(events);
    expect(f).toEqual({ wanted: 'pull request #7', base: 'main', reason: 'second' });
    expect(f && fallbackSentence(f)).toBe('Started at main instead of pull request #7: second');
  });

  it('ignores an earlier workspace of the same name and a malformed event', () => {
    const old = fallback('old', '2026-01-01T00:00:00.000Z');
    expect(baseFallbackOf([old], '2026-01-02T00:00:00.000Z')).toBeNull();
    expect(baseFallbackOf([old], '2026-01-01T00:00:00.000Z')?.reason).toBe('old');
    expect(baseFallbackOf([ev('workspace.base_fallback', { wanted: 7 }, '2026-01-03T00:00:00.000Z')])).toBeNull();
    expect(baseFallbackOf([])).toBeNull();
  });
});
