// Small shared pieces: the page shell, notices for empty/loading/error states, the state badge, a spinner.
import Link from 'next/link';
import type { ReactNode } from 'react';
import type { WorkspaceState } from '@grove/contracts';
import { ThemeToggle } from './ThemeToggle.tsx';
import './ui.css';

export function Shell({ title, subtitle, nav, children, fill = false }: { title: ReactNode; subtitle?: ReactNode; nav?: ReactNode; children: ReactNode; fill?: boolean }) {
  return (
    <div className={fill ? 'shell shell-fill' : 'shell'}>
      <header className="topbar">
        <Link href="/" className="brand" aria-label="Grove home">
          <span className="brand-mark" aria-hidden="true" />
          <span className="brand-name">Grove</span>
        </Link>
        <div className="topbar-title">
          <h1>{title}</h1>
          {subtitle ? <p className="topbar-sub">{subtitle}</p> : null}
        </div>
        {nav ? <nav className="topbar-nav" aria-label="Main">{nav}</nav> : null}
        <ThemeToggle />
      </header>
      <main className="main" id="main">
        {children}
      </main>
    </div>
  );
}

/** A failure the user should read now (announced by screen readers); nothing when there is none. */
export function ErrorText({ message, className }: { message: string | null | undefined | false; className: string }) {
  if (!message) return null;
  return (
    <p className={className} role="alert">
      {message}
    </p>
  );
}

export function Spinner({ label }: { label?: string }) {
  return <span className="spinner" role={label ? 'status' : undefined} aria-label={label} aria-hidden={label ? undefined : true} />;
}

export type Tone = 'info' | 'wait' | 'error' | 'empty';

/** A designed state instead of a blank area: what is going on, and what the reader can do about it. */
export function Notice({ tone = 'info', title, children, actions }: { tone?: Tone; title: ReactNode; children?: ReactNode; actions?: ReactNode }) {
  return (
    <section className={`notice notice-${tone}`} role={tone === 'error' ? 'alert' : 'status'} aria-live="polite">
      <div className="notice-icon" aria-hidden="true">
        {tone === 'wait' ? <Spinner /> : tone === 'error' ? '!' : tone === 'empty' ? '○' : 'i'}
      </div>
      <div className="notice-body">
        <h2>{title}</h2>
        {children}
        {actions ? <div className="notice-actions">{actions}</div> : null}
      </div>
    </section>
  );
}

/** Shown for a 401: the cookie is missing or stale, and only the start-up link sets it. */
export function SignInNotice() {
  return (
    <Notice tone="info" title="Open Grove with your access link">
      <p>
        This browser has not been let in yet. Open the link that <code>npm run up</code> printed in the terminal; it looks like{' '}
        <code>http://localhost:4300/login?token=…</code>. After that, this page works on its own.
      </p>
    </Notice>
  );
}

const STATE_LABEL: Record<WorkspaceState, string> = {
  queued: 'Waiting in line',
  creating: 'Starting',
  running: 'Running',
  stopped: 'Stopped',
  'tearing-down': 'Tearing down',
  gone: 'Gone',
  failed: 'Failed',
};

/** The default conversation's reader meets a conversation that is open or paused, not a running or stopped sandbox. */
const EVERYONE_LABEL: Partial<Record<WorkspaceState, string>> = { running: 'Open', stopped: 'Paused', creating: 'Opening', queued: 'Waiting' };

export function StateBadge({ state, audience = 'engineer' }: { state: WorkspaceState; audience?: 'engineer' | 'everyone' }) {
  return (
    <span className={`badge badge-${state}`}>
      <span className="badge-dot" aria-hidden="true" />
      {(audience === 'everyone' ? EVERYONE_LABEL[state] : undefined) ?? STATE_LABEL[state]}
    </span>
  );
}
