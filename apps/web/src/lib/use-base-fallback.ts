// Whether a workspace started somewhere else than it was asked to (a pull request that could not be fetched):
// read once from its audit trail, and again when such an event arrives for it.
import { useEffect, useState } from 'react';
import type { BaseFallbackData, Workspace } from '@grove/contracts';
import { api } from './api.ts';
import { baseFallbackOf } from './base.ts';
import { useEventTrigger } from './use-events.ts';

const TYPE = 'workspace.base_fallback';

export function useBaseFallback(w: Pick<Workspace, 'slug' | 'createdAt' | 'isDefault'>): BaseFallbackData | null {
  const [fallback, setFallback] = useState<BaseFallbackData | null>(null);
  const [reads, setReads] = useState(0);
  // The default workspace always starts at the default branch: nothing to ask for.
  const enabled = !w.isDefault;
  useEventTrigger((e) => e.slug === w.slug && e.type === TYPE, () => setReads((n) => n + 1), enabled);

  useEffect(() => {
    if (!enabled) return;
    let live = true;
    api.events(w.slug, undefined, TYPE).then(
      ({ events }) => live && setFallback(baseFallbackOf(events, w.createdAt)),
      // A note, not the workspace: when the trail cannot be read the card still shows its base ("From").
      () => undefined,
    );
    return () => {
      live = false;
    };
  }, [w.slug, w.createdAt, enabled, reads]);

  return enabled ? fallback : null;
}
