// The Preview view's choices, as pure functions: which ports can be shown, which one is shown after a read of
// /ports, and the port remembered per workspace in localStorage (so the same preview shows again after a reopen).
import { PROVIDER_RELAY_PORT, type ListeningPort } from '@grove/contracts';

/** The ports of a read that the chooser lists: every port but Grove's own credential relay, in port order. */
export function listedPorts(ports: readonly ListeningPort[]): ListeningPort[] {
  // The relay listens in every sandbox; sandboxes built before the backend reserved it still report it as
  // previewable. It is Grove's, not the agent's (as in PortsList).
  return ports.filter((p) => p.port !== PROVIDER_RELAY_PORT).sort((a, b) => a.port - b.port);
}

/** The ports that may be previewed (on the allowlist), in port order. */
export function previewablePorts(ports: readonly ListeningPort[]): number[] {
  return listedPorts(ports)
    .filter((p) => p.preview)
    .map((p) => p.port);
}

export type PreviewShown =
  /** Nothing chosen and nothing previewable listens. */
  | { kind: 'empty' }
  /** The chosen port listens: frame it. */
  | { kind: 'showing'; port: number }
  /** The chosen port listens no more (the dev server stopped, or the workspace was reopened): the others instead. */
  | { kind: 'gone'; port: number; others: number[] };

/**
 * What the view shows after a read: the chosen port while it listens; with none chosen, the first previewable port
 * (a dev server that just started shows by itself); a chosen port that went away stays chosen, so it shows again as
 * soon as it listens again, and the view offers the others meanwhile.
 */
export function decide(chosen: number | null, previewable: readonly number[]): PreviewShown {
  if (chosen === null) {
    const first = previewable[0];
    return first === undefined ? { kind: 'empty' } : { kind: 'showing', port: first };
  }
  if (previewable.includes(chosen)) return { kind: 'showing', port: chosen };
  return { kind: 'gone', port: chosen, others: previewable.filter((p) => p !== chosen) };
}

const KEY_PREFIX = 'grove.preview.port.';

/** The localStorage key of a workspace's chosen port. */
export function storageKey(slug: string): string {
  return `${KEY_PREFIX}${slug}`;
}

/** A stored port, or null for anything that is not one (absent, edited by hand, from an older version). */
export function parseStoredPort(raw: string | null): number | null {
  if (raw === null || !/^[1-9][0-9]{0,4}$/.test(raw)) return null;
  const n = Number(raw);
  return n <= 65535 ? n : null;
}

/** The workspace's remembered port; storage that throws (disabled, private mode) reads as none. */
export function loadPort(slug: string): number | null {
  try {
    return parseStoredPort(window.localStorage.getItem(storageKey(slug)));
  } catch {
    return null;
  }
}

export function savePort(slug: string, port: number): void {
  try {
    window.localStorage.setItem(storageKey(slug), String(port));
  } catch {
    // Not remembered, still shown: storage is a convenience here.
  }
}
