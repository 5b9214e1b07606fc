// The bell in the top bar: opt in to browser notifications when a workspace off screen ends a turn.
'use client';

import { useEffect, useState } from 'react';
import { loadNotifyPref, notifyPermission, requestNotifyPermission, saveNotifyPref, type NotifyPermission } from '../lib/notifications.ts';
import './NotifyToggle.css';

export function NotifyToggle() {
  const [on, setOn] = useState(false);
  const [permission, setPermission] = useState<NotifyPermission>('default');
  const [asking, setAsking] = useState(false);

  // localStorage and Notification exist only in the browser: read after mount so server and client render alike.
  useEffect(() => {
    setPermission(notifyPermission());
    setOn(loadNotifyPref(window.localStorage));
  }, []);

  const active = on && permission === 'granted';
  const blocked = permission === 'denied' || permission === 'unsupported';
  const hint =
    permission === 'unsupported'
      ? 'This browser has no notifications; finished turns still show on their tab and card.'
      : permission === 'denied'
        ? "Notifications are blocked for this site in the browser's settings; finished turns still show on their tab and card."
        : active
          ? 'Notifications are on: a workspace you are not looking at tells you when its turn ends. Click to turn them off.'
          : 'Get a browser notification when a workspace you are not looking at ends a turn.';

  const toggle = async () => {
    if (active) {
      setOn(false);
      saveNotifyPref(window.localStorage, false);
      return;
    }
    setAsking(true);
    const answer = await requestNotifyPermission();
    setAsking(false);
    setPermission(answer);
    const granted = answer === 'granted';
    setOn(granted);
    saveNotifyPref(window.localStorage, granted);
  };

  return (
    <button
      type="button"
      className={active ? 'navlink navbutton notify-toggle notify-toggle-on' : 'navlink navbutton notify-toggle'}
      aria-pressed={active}
      aria-disabled={blocked || asking}
      onClick={() => {
        if (!blocked && !asking) void toggle();
      }}
      title={hint}
    >
      <Bell off={!active} />
      {/* A phone: the bell alone, so the page title keeps its room; the label stays the button's accessible name. */}
      <span className="notify-label sr-only-phone">{active ? 'Notifying' : 'Notify me'}</span>
      {blocked ? <span className="sr-only"> ({hint})</span> : null}
    </button>
  );
}

/** An inline bell (no emoji: not every system has a font for it), struck through while off. */
function Bell({ off }: { off: boolean }) {
  return (
    <svg className="notify-bell" width="15" height="15" viewBox="0 0 16 16" aria-hidden="true" focusable="false">
      <path d="M8 1.5a4 4 0 0 0-4 4v2.8L2.6 11h10.8L12 8.3V5.5a4 4 0 0 0-4-4Z" fill="none" stroke="currentColor" strokeWidth="1.4" strokeLinejoin="round" />
      <path d="M6.3 13a1.8 1.8 0 0 0 3.4 0" fill="none" stroke="currentColor" strokeWidth="1.4" strokeLinecap="round" />
      {off ? <path d="M2.5 2.5l11 11" stroke="currentColor" strokeWidth="1.4" strokeLinecap="round" /> : null}
    </svg>
  );
}
