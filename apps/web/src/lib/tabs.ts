// The engineer view's open tabs: an ordered list of workspace slugs, kept in localStorage. The active
// tab is the URL (/p/<project>/w/<name>); /workspaces is the list, which is always there.
import { makeSlug, nameSchema, slugSchema } from '@grove/contracts';
import { z } from 'zod';

export const TABS_KEY = 'grove:tabs:v1';
/** The tab pinned to the right half for side-by-side viewing (wide screens only). */
export const SPLIT_KEY = 'grove:split:v1';
/** More than this and the strip stops being useful; the oldest tab makes room. */
export const MAX_TABS = 12;

export type Route = { kind: 'list' } | { kind: 'workspace'; slug: string; project: string; name: string } | { kind: 'invalid' } | { kind: 'other' };

function decode(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

/** What a pathname shows in the engineer view. Names are checked with the server's own rules. */
export function routeOf(pathname: string): Route {
  if (pathname === '/workspaces' || pathname === '/workspaces/') return { kind: 'list' };
  const m = /^\/p\/([^/]+)\/w\/([^/]+)\/?$/.exec(pathname);
  if (!m) return { kind: 'other' };
  const project = decode(m[1] ?? '');
  const name = decode(m[2] ?? '');
  if (project === null || name === null || !nameSchema.safeParse(project).success || !nameSchema.safeParse(name).success) return { kind: 'invalid' };
  return { kind: 'workspace', slug: makeSlug(project, name), project, name };
}

/** Opening a tab that is already open keeps its place; a new one goes to the end. */
export function openTab(tabs: readonly string[], slug: string): string[] {
  if (tabs.includes(slug)) return [...tabs];
  const next = [...tabs, slug];
  return next.length > MAX_TABS ? next.slice(next.length - MAX_TABS) : next;
}

export function closeTab(tabs: readonly string[], slug: string): string[] {
  return tabs.filter((t) => t !== slug);
}

/** Where to go when the active tab closes: its right neighbour, else its left one, else the list (null). */
export function neighbourOf(tabs: readonly string[], slug: string): string | null {
  const i = tabs.indexOf(slug);
  if (i < 0) return null;
  return tabs[i + 1] ?? tabs[i - 1] ?? null;
}

const storedSchema = z.array(slugSchema).max(MAX_TABS * 2);

/** Tabs from storage; anything malformed (an older format, a hand edit) gives an empty strip, never a crash. */
export function parseStoredTabs(raw: string | null): string[] {
  if (!raw) return [];
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    return [];
  }
  const r = storedSchema.safeParse(json);
  if (!r.success) return [];
  return [...new Set(r.data)].slice(-MAX_TABS);
}

export interface StoredTabs {
  tabs: string[];
  /** Only ever one of `tabs`. */
  split: string | null;
}

export function parseStoredSplit(raw: string | null, tabs: readonly string[]): string | null {
  const r = slugSchema.safeParse(raw);
  return r.success && tabs.includes(r.data) ? r.data : null;
}

export function loadTabs(): StoredTabs {
  try {
    const tabs = parseStoredTabs(window.localStorage.getItem(TABS_KEY));
    return { tabs, split: parseStoredSplit(window.localStorage.getItem(SPLIT_KEY), tabs) };
  } catch {
    // Storage can be switched off; tabs then last as long as the page.
    return { tabs: [], split: null };
  }
}

export function saveTabs({ tabs, split }: StoredTabs): void {
  try {
    window.localStorage.setItem(TABS_KEY, JSON.stringify(tabs));
    if (split) window.localStorage.setItem(SPLIT_KEY, split);
    else window.localStorage.removeItem(SPLIT_KEY);
  } catch {
    // See loadTabs.
  }
}

/** The tab shown beside the active one: the pinned tab, unless it is the active one itself. */
export function besideOf(split: string | null, active: string | null, tabs: readonly string[]): string | null {
  if (!split || !active || split === active || !tabs.includes(split)) return null;
  return split;
}
