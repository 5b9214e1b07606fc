// The cockpit's turn-end notices, live from the shared event feed (lib/notifications.ts has the rules).
'use client';

import { useEffect, useRef, useState } from 'react';
import { eventFeed } from './events.ts';
import { clearShown, loadNotifyPref, noteTurnEnded, notificationOf, notifyPermission, shouldNotify, showTurnNotification, turnNoticeOf, type TurnNotices } from './notifications.ts';

const storage = (): Storage | null => (typeof window === 'undefined' ? null : window.localStorage);

/**
 * Notices of turns that ended in workspaces not on screen (`shown`: the slugs whose tab is visible), cleared as
 * soon as their tab is shown; and, when the user opted in, a browser notification whose click calls `open`.
 * Only turns that end while the page is open count: the feed's first connection streams new events only.
 */
export function useTurnNotices(shown: readonly string[], o: { titleOf: (slug: string) => string; open: (slug: string) => void }): TurnNotices {
  const [notices, setNotices] = useState<TurnNotices>({});
  const shownKey = [...shown].sort().join('\n');
  const shownRef = useRef<ReadonlySet<string>>(new Set(shown));
  shownRef.current = new Set(shown);
  const optsRef = useRef(o);
  optsRef.current = o;

  useEffect(() => {
    const off = eventFeed().subscribe({
      onEvent: (e) => {
        const notice = turnNoticeOf(e);
        if (!notice) return;
        const visible = shownRef.current.has(notice.slug);
        setNotices((prev) => noteTurnEnded(prev, notice, shownRef.current));
        // The choice is read at the moment of the event, so the toggle needs no shared state with this hook.
        if (shouldNotify({ enabled: loadNotifyPref(storage()), permission: notifyPermission(), notice, shown: visible, pageHidden: document.visibilityState === 'hidden' })) {
          const { titleOf, open } = optsRef.current;
          showTurnNotification(notificationOf(notice, titleOf(notice.slug)), () => open(notice.slug));
        }
      },
    });
    return off;
  }, []);

  // Showing a tab is reading its news.
  useEffect(() => {
    setNotices((prev) => clearShown(prev, new Set(shownKey ? shownKey.split('\n') : [])));
  }, [shownKey]);

  return notices;
}
