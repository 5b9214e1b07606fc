// The theme switch in the top bar: System → Light → Dark, remembered (lib/theme.ts); the head script applied it before paint.
'use client';

import { useEffect, useState } from 'react';
import { THEMES, applyTheme, loadTheme, saveTheme, type Theme } from '../lib/theme.ts';
import './ThemeToggle.css';

const LABEL: Record<Theme, string> = { system: 'System', light: 'Light', dark: 'Dark' };

export function ThemeToggle() {
  const [theme, setTheme] = useState<Theme>('system');

  // localStorage exists only in the browser: read after mount so server and client render alike.
  useEffect(() => setTheme(loadTheme(window.localStorage)), []);

  const next = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length] ?? 'system';
  const choose = () => {
    setTheme(next);
    applyTheme(document.documentElement, next);
    saveTheme(window.localStorage, next);
  };

  return (
    <button type="button" className="navlink navbutton theme-toggle" onClick={choose} aria-label={`Theme: ${LABEL[theme]}`} title={`Theme: ${LABEL[theme]} (click for ${LABEL[next]})`}>
      <ThemeIcon theme={theme} />
      <span className="theme-label" aria-hidden="true">
        {LABEL[theme]}
      </span>
    </button>
  );
}

/** Half-filled circle for System, a sun for Light, a moon for Dark (inline: no icon font). */
function ThemeIcon({ theme }: { theme: Theme }) {
  const common = { className: 'theme-icon', width: 15, height: 15, viewBox: '0 0 16 16', 'aria-hidden': true, focusable: false } as const;
  if (theme === 'light') {
    return (
      <svg {...common}>
        <circle cx="8" cy="8" r="3" fill="none" stroke="currentColor" strokeWidth="1.4" />
        <path d="M8 1v2M8 13v2M1 8h2M13 8h2M3 3l1.4 1.4M11.6 11.6 13 13M3 13l1.4-1.4M11.6 4.4 13 3" stroke="currentColor" strokeWidth="1.4" strokeLinecap="round" />
      </svg>
    );
  }
  if (theme === 'dark') {
    return (
      <svg {...common}>
        <path d="M13.5 9.5A5.5 5.5 0 0 1 6.5 2.5a5.5 5.5 0 1 0 7 7Z" fill="none" stroke="currentColor" strokeWidth="1.4" strokeLinejoin="round" />
      </svg>
    );
  }
  return (
    <svg {...common}>
      <circle cx="8" cy="8" r="6" fill="none" stroke="currentColor" strokeWidth="1.4" />
      <path d="M8 2a6 6 0 0 1 0 12Z" fill="currentColor" />
    </svg>
  );
}
