// The engineer view: the list and the open workspaces as tabs. It lives in the layout shared by
// /workspaces and /p/<project>/w/<name>, so switching tabs is a client navigation that keeps every
// opened tab mounted: its stream keeps running, and its scroll and draft stay as they were.
'use client';

import Link from 'next/link';
import { usePathname, useRouter } from 'next/navigation';
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { parseSlug, type Workspace, type WorkspaceState } from '@grove/contracts';
import { isFull, workspaceHref } from '../lib/capacity.ts';
import { requestStart } from '../lib/start-intents.ts';
import { badgeOf, type TurnNotices } from '../lib/notifications.ts';
import { besideOf, closeTab, loadTabs, neighbourOf, openTab, routeOf, saveTabs } from '../lib/tabs.ts';
import { useTurnNotices } from '../lib/use-turn-notices.ts';
import { useWorkspaces } from '../lib/use-workspaces.ts';
import { NotifyToggle } from './NotifyToggle.tsx';
import { ResumeButton } from './Resume.tsx';
import { Notice, Shell, SignInNotice, Spinner } from './ui.tsx';
import { WorkspacePane } from './WorkspacePane.tsx';
import { WorkspacesList } from './WorkspacesList.tsx';
import './Cockpit.css';

const hrefOf = (slug: string) => workspaceHref(parseSlug(slug));
const titleOf = (slug: string) => {
  const { project, name } = parseSlug(slug);
  return name === 'default' ? project : name;
};

export function Cockpit() {
  const pathname = usePathname();
  const router = useRouter();
  const route = routeOf(pathname);
  const activeSlug = route.kind === 'workspace' ? route.slug : null;
  const workspaces = useWorkspaces();
  const { load } = workspaces;
  const [tabs, setTabs] = useState<string[]>([]);
  const [split, setSplit] = useState<string | null>(null);
  const [restored, setRestored] = useState(false);
  // Tabs are mounted the first time they are shown, not all at once after a reload.
  const [mounted, setMounted] = useState<string[]>([]);
  const mountedRef = useRef(new Set<string>());
  const [busy, setBusy] = useState<Record<string, boolean>>({});
  const pruned = useRef(false);

  // localStorage exists only in the browser: restore after mount so server and client render alike.
  useEffect(() => {
    const stored = loadTabs();
    setTabs(stored.tabs);
    setSplit(stored.split);
    setRestored(true);
  }, []);
  useEffect(() => {
    if (restored) saveTabs({ tabs, split: split && tabs.includes(split) ? split : null });
  }, [tabs, split, restored]);

  const beside = besideOf(split, activeSlug, tabs);
  // A pinned tab restored after a reload is mounted when it is first shown, without being started.
  useEffect(() => {
    if (!beside || mountedRef.current.has(beside)) return;
    mountedRef.current.add(beside);
    setMounted([...mountedRef.current]);
  }, [beside]);

  useEffect(() => {
    if (!activeSlug || !restored) return;
    setTabs((t) => openTab(t, activeSlug));
    if (mountedRef.current.has(activeSlug)) return;
    mountedRef.current.add(activeSlug);
    setMounted([...mountedRef.current]);
    // Opening a workspace by its address reopens it: the conversation starts it if it is stopped.
    requestStart(activeSlug);
  }, [activeSlug, restored]);

  // Tabs restored from an earlier visit whose workspace is gone by now are dropped once, quietly.
  useEffect(() => {
    if (pruned.current || !restored || load.kind !== 'ready') return;
    pruned.current = true;
    const live = new Set(load.data.workspaces.filter((w) => w.state !== 'gone').map((w) => w.slug));
    setTabs((t) => t.filter((s) => live.has(s) || s === activeSlug));
  }, [load, restored, activeSlug]);

  const onBusyChange = useCallback((slug: string, b: boolean) => {
    setBusy((prev) => (Boolean(prev[slug]) === b ? prev : { ...prev, [slug]: b }));
  }, []);

  const tabsRef = useRef(tabs);
  tabsRef.current = tabs;
  const activeRef = useRef(activeSlug);
  activeRef.current = activeSlug;
  const onClose = useCallback(
    (slug: string) => {
      const next = neighbourOf(tabsRef.current, slug);
      setTabs((t) => closeTab(t, slug));
      setSplit((p) => (p === slug ? null : p));
      mountedRef.current.delete(slug);
      setMounted([...mountedRef.current]);
      // Closing a tab only closes the view: the workspace keeps running.
      if (slug === activeRef.current) router.push(next ? hrefOf(next) : '/workspaces');
    },
    [router],
  );

  /** Pins a tab to the right half; pinning the one on screen brings a neighbour in beside it. */
  const onPin = useCallback(
    (slug: string, pin: boolean) => {
      setSplit(pin ? slug : null);
      if (!pin || slug !== activeRef.current) return;
      const other = neighbourOf(tabsRef.current, slug);
      if (other) router.push(hrefOf(other));
    },
    [router],
  );

  const onForked = useCallback((slug: string) => setTabs((t) => openTab(t, slug)), []);

  // What is on screen: a turn that ends there needs no badge. The list view shows no workspace's thread.
  const shown = useMemo(() => [activeSlug, beside].filter((s): s is string => s !== null), [activeSlug, beside]);
  const notices = useTurnNotices(shown, { titleOf, open: (slug) => router.push(hrefOf(slug)) });

  const list = load.kind === 'ready' ? load.data.workspaces : [];
  const nav = (
    <>
      <NotifyToggle />
      <ResumeButton />
      <Link href="/" className="navlink nav-conversation">
        <svg className="nav-conversation-icon" width="15" height="15" viewBox="0 0 16 16" aria-hidden="true" focusable="false">
          <path d="M2.5 3.5h11v7h-6l-3 2.5v-2.5h-2z" fill="none" stroke="currentColor" strokeWidth="1.4" strokeLinejoin="round" />
        </svg>
        <span className="sr-only-phone">Conversation</span>
      </Link>
    </>
  );

  if (load.kind === 'signin') {
    return (
      <Shell title="Workspaces" nav={nav}>
        <div className="centered">
          <SignInNotice />
        </div>
      </Shell>
    );
  }

  const capacity = load.kind === 'ready' ? load.data.capacity : null;
  const subtitle = capacity
    ? `${capacity.running} / ${capacity.cap} sandboxes running${capacity.warm ? `, ${capacity.warm} warm` : ''}${isFull(capacity) ? ' (full)' : ''}`
    : 'Agents working side by side, each on its own branch';

  return (
    <Shell title="Workspaces" subtitle={subtitle} nav={nav} fill>
      <TabStrip tabs={tabs} active={activeSlug} beside={beside} list={list} busy={busy} notices={notices} onClose={onClose} listActive={route.kind === 'list'} />
      <div className={beside ? 'panes panes-split' : 'panes'}>
        <section className="pane pane-list" hidden={route.kind !== 'list'} aria-label="All workspaces">
          <WorkspacesList workspaces={workspaces} onForked={onForked} notices={notices} />
        </section>
        {mounted.map((slug) => {
          const shown = slug === activeSlug || slug === beside;
          return (
            <section
              key={slug}
              className={slug === beside ? 'pane pane-beside' : 'pane'}
              hidden={!shown}
              aria-label={`Workspace ${titleOf(slug)}`}
            >
              <WorkspacePane
                slug={slug}
                active={shown}
                pinned={slug === split}
                canPin={tabs.length > 1}
                onPin={onPin}
                onBusyChange={onBusyChange}
                onClose={onClose}
              />
            </section>
          );
        })}
        {route.kind === 'invalid' || route.kind === 'other' ? (
          <section className="pane">
            <div className="centered">
              <Notice tone="empty" title="This address does not name a workspace">
                <p>
                  Workspace addresses look like <code>/p/demo/w/fix-login</code>. <Link href="/workspaces">See all workspaces</Link>.
                </p>
              </Notice>
            </div>
          </section>
        ) : null}
      </div>
    </Shell>
  );
}

interface TabStripProps {
  tabs: string[];
  active: string | null;
  beside: string | null;
  listActive: boolean;
  list: Workspace[];
  busy: Record<string, boolean>;
  /** Turns that ended while the tab was not shown. */
  notices: TurnNotices;
  onClose: (slug: string) => void;
}

function TabStrip({ tabs, active, beside, listActive, list, busy, notices, onClose }: TabStripProps) {
  const stateOf = (slug: string): WorkspaceState | null => list.find((w) => w.slug === slug && w.state !== 'gone')?.state ?? null;
  const activeRef = useRef<HTMLLIElement>(null);
  // The active tab is scrolled into view on narrow screens, where the strip scrolls sideways.
  useEffect(() => {
    activeRef.current?.scrollIntoView({ block: 'nearest', inline: 'nearest' });
  }, [active]);

  return (
    <nav className="tabs" aria-label="Open workspaces">
      <ul className="tabs-list">
        <li className={listActive ? 'tab tab-active' : 'tab'}>
          <Link href="/workspaces" className="tab-link" aria-current={listActive ? 'page' : undefined}>
            All workspaces
          </Link>
        </li>
        {tabs.map((slug) => {
          const state = stateOf(slug);
          const isActive = slug === active;
          const title = titleOf(slug);
          const replying = busy[slug] === true;
          const status = replying ? 'replying' : state === 'creating' ? 'starting' : (state ?? 'closed');
          const notice = notices[slug];
          const badge = notice ? badgeOf(notice) : null;
          return (
            <li key={slug} className={isActive ? 'tab tab-active' : slug === beside ? 'tab tab-beside' : 'tab'} ref={isActive ? activeRef : undefined}>
              <Link href={hrefOf(slug)} className="tab-link" aria-current={isActive ? 'page' : undefined} title={`${title}: ${status}`}>
                {state === 'creating' ? <Spinner /> : <span className={`tab-dot tab-dot-${state ?? 'gone'}`} aria-hidden="true" />}
                <span className="tab-name">{title}</span>
                {replying ? <span className="tab-replying" aria-hidden="true" /> : null}
                <span className="sr-only"> ({status}{slug === beside ? ', shown beside' : ''})</span>
                {/* After the status, so the link's name still starts "<name> (<status>)". */}
                {notice && badge ? (
                  <span className={`tab-badge tab-badge-${notice.kind}`} role="img" aria-label={badge.label} title={badge.label}>
                    {badge.glyph}
                  </span>
                ) : null}
              </Link>
              <button type="button" className="tab-close" onClick={() => onClose(slug)} aria-label={`Close tab ${title}`} title="Close the tab (the workspace keeps running)">
                <span aria-hidden="true">×</span>
              </button>
            </li>
          );
        })}
      </ul>
    </nav>
  );
}
