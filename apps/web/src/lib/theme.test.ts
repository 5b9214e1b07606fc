import { describe, expect, it } from 'vitest';
import { THEME_KEY, THEME_SCRIPT, loadTheme, parseTheme, saveTheme } from './theme.ts';

function memory(initial: Record<string, string> = {}) {
  const m = new Map(Object.entries(initial));
  return { getItem: (k: string) => m.get(k) ?? null, setItem: (k: string, v: string) => void m.set(k, v), m };
}

/** Runs THEME_SCRIPT against a stand-in document and storage, as the browser runs it in <head>. */
function runScript(stored: string | null | Error): string | undefined {
  const root = { dataset: {} as Record<string, string> };
  const storage = {
    getItem: () => {
      if (stored instanceof Error) throw stored;
      return stored;
    },
  };
  new Function('localStorage', 'document', THEME_SCRIPT)(storage, { documentElement: root });
  return root.dataset.theme;
}

describe('theme', () => {
  it('parses only the three theme names; anything else is the system theme', () => {
    expect(parseTheme('dark')).toBe('dark');
    expect(parseTheme('light')).toBe('light');
    expect(parseTheme('system')).toBe('system');
    for (const raw of [null, '', 'Dark', 'dark ', '"><script>', 'blue']) expect(parseTheme(raw)).toBe('system');
  });

  it('saves and loads the choice; a throwing storage leaves the system theme', () => {
    const s = memory();
    saveTheme(s, 'dark');
    expect(s.m.get(THEME_KEY)).toBe('dark');
    expect(loadTheme(s)).toBe('dark');
    const broken = { getItem: () => { throw new Error('denied'); }, setItem: () => { throw new Error('denied'); } };
    expect(loadTheme(broken)).toBe('system');
    expect(() => saveTheme(broken, 'light')).not.toThrow();
  });

  it('the inline head script applies the stored theme the same way, and nothing unknown', () => {
    expect(runScript('dark')).toBe('dark');
    expect(runScript('light')).toBe('light');
    expect(runScript(null)).toBe('system');
    expect(runScript('x" onload="alert(1)')).toBe('system');
    expect(runScript(new Error('SecurityError'))).toBe('system');
  });
});
