// Turn ends of workspaces the user is not looking at: a badge on their tab, an entry on their card, and (opt-in) a
// browser notification. Everything here but the last three functions is pure, so it is unit-tested without a browser.
import { turnEndedDataSchema, type GroveEvent } from '@grove/contracts';
import { relativeTime } from './time.ts';

/** done: finished; waits: finished and the agent waits for the user; failed; stopped: cancelled or cut by a stop. */
export type TurnNoticeKind = 'done' | 'waits' | 'failed' | 'stopped';

export interface TurnNotice {
  slug: string;
  turn: string;
  kind: TurnNoticeKind;
  /** The failed turn's short error (core shortened it), else null. */
  error: string | null;
  /** When the turn ended (the event's time). */
  at: string;
  /** The event's id: a replay of an older event never replaces a newer notice. */
  id: number;
}

/** Open notices by slug: at most one per workspace, the newest. */
export type TurnNotices = Readonly<Record<string, TurnNotice>>;

/** A `turn.ended` event as a notice; null for any other event or one whose data does not match the contract. */
export function turnNoticeOf(e: GroveEvent): TurnNotice | null {
  if (e.type !== 'turn.ended') return null;
  const parsed = turnEndedDataSchema.safeParse(e.data);
  if (!parsed.success) return null;
  const d = parsed.data;
  const kind: TurnNoticeKind = d.outcome === 'failed' ? 'failed' : d.outcome === 'cancelled' ? 'stopped' : d.waitingForUser ? 'waits' : 'done';
  return { slug: e.slug, turn: d.turn, kind, error: kind === 'failed' ? d.error : null, at: e.at, id: e.id };
}

/**
 * Adds a turn's end unless its workspace is on screen (the user saw it end). A notice older than the one kept
 * (a replay after a reconnect) changes nothing.
 */
export function noteTurnEnded(notices: TurnNotices, notice: TurnNotice, shown: ReadonlySet<string>): TurnNotices {
  if (shown.has(notice.slug)) return notices;
  const kept = notices[notice.slug];
  if (kept && kept.id >= notice.id) return notices;
  return { ...notices, [notice.slug]: notice };
}

/** Drops the notices of the workspaces now on screen; the same object when none of them had one. */
export function clearShown(notices: TurnNotices, shown: ReadonlySet<string>): TurnNotices {
  if (![...shown].some((slug) => slug in notices)) return notices;
  return Object.fromEntries(Object.entries(notices).filter(([slug]) => !shown.has(slug)));
}

/** The tab's badge: a glyph for the eye and the words for a screen reader and the tooltip. */
export function badgeOf(n: TurnNotice): { glyph: string; label: string } {
  switch (n.kind) {
    case 'failed':
      return { glyph: '!', label: n.error ? `Turn failed: ${n.error}` : 'Turn failed' };
    case 'waits':
      return { glyph: '✓', label: 'Turn finished, waiting for you' };
    case 'done':
      return { glyph: '✓', label: 'Turn finished' };
    case 'stopped':
      return { glyph: '■', label: 'Turn stopped' };
  }
}

/** The card's entry: "Finished 2 minutes ago, waiting for you", "Failed just now: <error>". */
export function entryOf(n: TurnNotice, now: number = Date.now()): string {
  const when = relativeTime(n.at, now);
  switch (n.kind) {
    case 'failed':
      return n.error ? `Failed ${when}: ${n.error}` : `Failed ${when}`;
    case 'waits':
      return `Finished ${when}, waiting for you`;
    case 'done':
      return `Finished ${when}`;
    case 'stopped':
      return `Stopped ${when}`;
  }
}

export type NotifyPermission = 'default' | 'granted' | 'denied' | 'unsupported';

/**
 * A browser notification is shown for a finished or failed turn (a stopped one was the user's own doing, or the
 * workspace's stop), when the user turned them on and the browser allows them, and when the user cannot see the
 * workspace: another Grove tab is shown, or the whole page is in the background.
 */
export function shouldNotify(o: { enabled: boolean; permission: NotifyPermission; notice: TurnNotice; shown: boolean; pageHidden: boolean }): boolean {
  if (!o.enabled || o.permission !== 'granted' || o.notice.kind === 'stopped') return false;
  return !o.shown || o.pageHidden;
}

/** Title and body of the browser notification; `tag` makes a second one for the same workspace replace the first. */
export function notificationOf(n: TurnNotice, title: string): { title: string; body: string; tag: string } {
  const body = n.kind === 'failed' ? (n.error ? `The turn failed: ${n.error}` : 'The turn failed.') : n.kind === 'waits' ? 'The agent finished its turn and waits for you.' : 'The agent finished its turn.';
  return { title: `${title}: ${n.kind === 'failed' ? 'turn failed' : 'turn finished'}`, body, tag: `grove-turn-${n.slug}` };
}

/** localStorage key of the "Notify me" choice. */
export const NOTIFY_KEY = 'grove.notify';

/** Only an explicit "on" counts: notifications are opt-in, so anything else (absent, garbage) is off. */
export function parseNotifyPref(raw: string | null): boolean {
  return raw === 'on';
}

/** The smallest part of Storage used here, so a test can hand in a map. */
export interface StorageLike {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

export function loadNotifyPref(storage: StorageLike | null): boolean {
  try {
    return parseNotifyPref(storage?.getItem(NOTIFY_KEY) ?? null);
  } catch {
    // A storage that throws (privacy mode, quota) leaves notifications off; the page goes on.
    return false;
  }
}

export function saveNotifyPref(storage: StorageLike | null, on: boolean): void {
  try {
    storage?.setItem(NOTIFY_KEY, on ? 'on' : 'off');
  } catch {
    // Not remembered across reloads then; the choice still holds for this page.
  }
}

// ---- browser-only ----

/** The page's permission for notifications ('unsupported' where the browser has no Notification API). */
export function notifyPermission(): NotifyPermission {
  if (typeof window === 'undefined' || !('Notification' in window)) return 'unsupported';
  return Notification.permission;
}

/** Asks the browser (it shows its prompt only while the permission is 'default'). */
export async function requestNotifyPermission(): Promise<NotifyPermission> {
  if (notifyPermission() === 'unsupported') return 'unsupported';
  try {
    return await Notification.requestPermission();
  } catch {
    return notifyPermission();
  }
}

/** Shows one notification; a click brings the page forward and opens the workspace's tab. */
export function showTurnNotification(content: { title: string; body: string; tag: string }, onClick: () => void): void {
  if (notifyPermission() !== 'granted') return;
  try {
    const n = new Notification(content.title, { body: content.body, tag: content.tag });
    n.onclick = () => {
      window.focus();
      onClick();
      n.close();
    };
  } catch {
    // Some browsers allow notifications only from a service worker (Chrome on Android): the badge still says it.
  }
}
