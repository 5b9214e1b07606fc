// Tabs: the URL scheme, open/close order, and storage that never breaks the page.
import { describe, expect, it } from 'vitest';
import { MAX_TABS, besideOf, closeTab, neighbourOf, openTab, parseStoredSplit, parseStoredTabs, routeOf } from './tabs.ts';

describe('routeOf', () => {
  it('reads the list, a workspace and the default workspace', () => {
    expect(routeOf('/workspaces')).toEqual({ kind: 'list' });
    expect(routeOf('/p/demo/w/fix-login')).toEqual({ kind: 'workspace', slug: 'demo~fix-login', project: 'demo', name: 'fix-login' });
    expect(routeOf('/p/demo/w/default')).toEqual({ kind: 'workspace', slug: 'demo', project: 'demo', name: 'default' });
  });

  it('refuses names the server would refuse, and malformed escapes', () => {
    expect(routeOf('/p/Demo/w/x')).toEqual({ kind: 'invalid' });
    expect(routeOf('/p/demo/w/a~b')).toEqual({ kind: 'invalid' });
    expect(routeOf('/p/demo/w/%E0%A4%A')).toEqual({ kind: 'invalid' });
    expect(routeOf('/p/demo/w/x/extra')).toEqual({ kind: 'other' });
  });
});

describe('tab list', () => {
  it('opens at the end once, closes, and picks the neighbour to show next', () => {
    let tabs = openTab([], 'demo~a');
    tabs = openTab(tabs, 'demo~b');
    tabs = openTab(tabs, 'demo~a');
    expect(tabs).toEqual(['demo~a', 'demo~b']);
    expect(neighbourOf(tabs, 'demo~a')).toBe('demo~b');
    expect(neighbourOf(tabs, 'demo~b')).toBe('demo~a');
    expect(neighbourOf(['demo~a'], 'demo~a')).toBeNull();
    expect(closeTab(tabs, 'demo~a')).toEqual(['demo~b']);
  });

  it('drops the oldest tab beyond the limit', () => {
    let tabs: string[] = [];
    for (let i = 0; i <= MAX_TABS; i++) tabs = openTab(tabs, `demo~w${i}`);
    expect(tabs).toHaveLength(MAX_TABS);
    expect(tabs[0]).toBe('demo~w1');
  });
});

describe('parseStoredTabs', () => {
  it('keeps valid slugs, once each', () => {
    expect(parseStoredTabs(JSON.stringify(['demo~a', 'demo', 'demo~a']))).toEqual(['demo~a', 'demo']);
  });
  it('gives an empty strip for anything else', () => {
    for (const raw of [null, '', '{', '{"tabs":[]}', JSON.stringify(['../etc']), JSON.stringify([1])]) expect(parseStoredTabs(raw)).toEqual([]);
  });
});

describe('side by side', () => {
  it('shows the pinned tab beside another active tab only', () => {
    const tabs = ['demo~a', 'demo~b'];
    expect(besideOf('demo~b', 'demo~a', tabs)).toBe('demo~b');
    expect(besideOf('demo~b', 'demo~b', tabs)).toBeNull();
    expect(besideOf('demo~b', null, tabs)).toBeNull();
    expect(besideOf('demo~c', 'demo~a', tabs)).toBeNull();
  });
  it('restores a pin only for an open tab', () => {
    expect(parseStoredSplit('demo~a', ['demo~a'])).toBe('demo~a');
    expect(parseStoredSplit('demo~x', ['demo~a'])).toBeNull();
    expect(parseStoredSplit(null, ['demo~a'])).toBeNull();
  });
});
