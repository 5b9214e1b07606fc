// Pure helpers of the engineer's Project settings dialog: the overlay files in words, and an in-page notice so the
// cards that name "the project's setting" follow a change (a config change writes no event, so the feed cannot tell them).
import { DEFAULT_OVERLAY_FILES, type OverlayFileInfo, type ProjectConfig } from '@grove/contracts';

/** "0 B", "840 B", "1.5 KiB", "1 MiB": an overlay file is at most 1 MiB. */
export function sizeLabel(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const [value, unit] = bytes < 1024 * 1024 ? [bytes / 1024, 'KiB'] : [bytes / (1024 * 1024), 'MiB'];
  // One decimal while it says something ("1.5 KiB"), none when it is .0 or the number is large.
  const text = value >= 100 ? String(Math.round(value)) : value.toFixed(1).replace(/\.0$/, '');
  return `${text} ${unit}`;
}

/** How a workspace gets the file (docs/git-flow.md): a read-only mount at every start, or a copy at fork. */
export function overlayModeLabel(f: Pick<OverlayFileInfo, 'writable'>): string {
  return f.writable ? 'copied at fork, writable' : 'mounted read-only';
}

/** The files sorted by path, so the list does not reorder itself after a save. */
export function byPath(files: readonly OverlayFileInfo[]): OverlayFileInfo[] {
  return [...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/**
 * What the project lets into its overlay: `overlay.files` of its config (globs), else the defaults; and the
 * entries whose files are copied writable. The server refuses any other path, so the form names these.
 */
export function overlayEntries(config: ProjectConfig): { files: readonly string[]; writable: readonly string[]; isDefault: boolean } {
  const files = config.overlay?.files;
  return { files: files ?? DEFAULT_OVERLAY_FILES, writable: config.overlay?.writable ?? [], isDefault: files === undefined };
}

/** Entries that name one file (no * or ?): offered as suggestions for the path. */
export function plainEntries(entries: readonly string[]): string[] {
  return entries.filter((e) => !/[*?]/.test(e));
}

type KeepListener = (project: string, keeps: boolean) => void;
const keepListeners = new Set<KeepListener>();

/** Tells every mounted listener that a project's keepCheckoutOnClose is now `keeps`. */
export function announceProjectKeep(project: string, keeps: boolean): void {
  for (const l of [...keepListeners]) l(project, keeps);
}

/** Returns the unsubscribe function. */
export function onProjectKeep(listener: KeepListener): () => void {
  keepListeners.add(listener);
  return () => {
    keepListeners.delete(listener);
  };
}
