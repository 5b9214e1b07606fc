/** Turns on the host side: the turns that changed files, one turn's diff, and undo (TurnGuard, agents.ts) on the slug's mutex. */
import type { TurnDiffResponse, TurnSummary, UndoResponse } from '@grove/contracts';
import { notFound } from './context.ts';
import type { GroveContext } from './context.ts';
import type { TurnGuard } from './agents.ts';
import { validSlug } from './paths.ts';
import { listTurns, revertsFromEvents, turnDiff as readTurnDiff } from './turn-snapshots.ts';
import type { RevertRecord } from './turn-snapshots.ts';

/** Events are read in pages of this many. */
const PAGE = 1000;

export async function undo(ctx: GroveContext, guard: Pick<TurnGuard, 'undo'>, slug: string): Promise<UndoResponse> {
  validSlug(slug);
  return ctx.slugs.run(slug, () => guard.undo(slug));
}

// Reading turns needs only the workspace store's refs and the audit events: no container.
export async function turns(ctx: GroveContext, slug: string): Promise<TurnSummary[]> {
  validSlug(slug);
  const row = await ctx.store.live(slug);
  if (!row) throw notFound(slug);
  const reverts: RevertRecord[] = [];
  for (let after = 0; ; ) {
    const page = await ctx.store.events({ slug, type: 'turn.reverted', after, limit: PAGE });
    reverts.push(...revertsFromEvents(page, row.id));
    if (page.length < PAGE) break;
    after = page.at(-1)?.id ?? after;
  }
  // Under the lock: the first read of a store moves an older Grove's refs into it.
  return ctx.lock.withLock(row.project, () => listTurns({ repo: ctx.paths.repo(row.project), objects: ctx.paths.workspaceObjects(slug), slug }, reverts));
}

export async function turnDiff(ctx: GroveContext, slug: string, n: number): Promise<TurnDiffResponse> {
  validSlug(slug);
  const row = await ctx.store.live(slug);
  if (!row) throw notFound(slug);
  return ctx.lock.withLock(row.project, () => readTurnDiff({ repo: ctx.paths.repo(row.project), objects: ctx.paths.workspaceObjects(slug), slug }, n));
}
