// The root layout: document shell and the global stylesheet (tokens, base, shell).
// globals.css first: the components' stylesheets (imported by the components) come after it in the cascade.
import './globals.css';
import type { Metadata, Viewport } from 'next';
import type { ReactNode } from 'react';
import { ResumeProvider } from '../components/Resume.tsx';
import { THEME_SCRIPT } from '../lib/theme.ts';

export const metadata: Metadata = {
  title: 'Grove',
  description: 'Coding agents, each in its own workspace.',
};

export const viewport: Viewport = {
  width: 'device-width',
  initialScale: 1,
  themeColor: [
    { media: '(prefers-color-scheme: light)', color: '#f6f5f1' },
    { media: '(prefers-color-scheme: dark)', color: '#141714' },
  ],
};

export default function RootLayout({ children }: { children: ReactNode }) {
  return (
    // suppressHydrationWarning: THEME_SCRIPT sets data-theme on <html> before React hydrates it.
    <html lang="en" suppressHydrationWarning>
      <head>
        {/* Before the body is parsed, so the chosen theme is the first one painted (lib/theme.ts). */}
        <script dangerouslySetInnerHTML={{ __html: THEME_SCRIPT }} />
      </head>
      <body>
        <a href="#main" className="skip-link">
          Skip to content
        </a>
        {/* The /resume picker and its Ctrl/Cmd+K shortcut work on every screen. */}
        <ResumeProvider>{children}</ResumeProvider>
      </body>
    </html>
  );
}
