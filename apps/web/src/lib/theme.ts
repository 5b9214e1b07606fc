// The colour theme the user chose (System, Light or Dark), remembered in localStorage and applied as data-theme on
// <html>. THEME_SCRIPT runs inline in the document's <head>, before the body is parsed, so a reload never paints the
// other theme first; the toggle applies a change at once and saves it.
import type { StorageLike } from './notifications.ts';

export const THEMES = ['system', 'light', 'dark'] as const;
export type Theme = (typeof THEMES)[number];
export const THEME_KEY = 'grove.theme';

export function parseTheme(raw: string | null): Theme {
  return (THEMES as readonly string[]).includes(raw ?? '') ? (raw as Theme) : 'system';
}

export function loadTheme(storage: StorageLike | null): Theme {
  try {
    return parseTheme(storage?.getItem(THEME_KEY) ?? null);
  } catch {
    // A storage that throws (privacy mode) leaves the system's theme.
    return 'system';
  }
}

export function saveTheme(storage: StorageLike | null, theme: Theme): void {
  try {
    storage?.setItem(THEME_KEY, theme);
  } catch {
    // Not remembered across reloads then; the choice still holds for this page.
  }
}

/** data-theme on <html>: "light" or "dark" pin color-scheme (globals.css); "system" leaves it to the media query. */
export function applyTheme(root: { dataset: DOMStringMap }, theme: Theme): void {
  root.dataset.theme = theme;
}

/**
 * The inline <head> script: the same parse and apply as above, in plain ES5 with no imports (it runs before any
 * bundle). Only the one stored value is read, and only a known theme name is ever written to the attribute.
 */
export const THEME_SCRIPT = `(function(){var t='system';try{var v=localStorage.getItem(${JSON.stringify(THEME_KEY)});if(${JSON.stringify(THEMES)}.indexOf(v)>=0)t=v}catch(e){}document.documentElement.dataset.theme=t})();`;
