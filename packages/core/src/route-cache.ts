// The proxy's short memory of live rows (Registry.route): one registry read per workspace per ROUTE_CACHE_MS
// instead of one per proxied request.
import type { WorkspaceRow } from '@grove/db';

/** How long the proxy may route on a cached row; another process's change shows within this time. */
export const ROUTE_CACHE_MS = 1_000;
const ROUTE_CACHE_MAX = 4_096;

export class RouteCache {
  private readonly rows = new Map<string, { row: WorkspaceRow | undefined; at: number }>();

  async get(slug: string, load: () => Promise<WorkspaceRow | undefined>): Promise<WorkspaceRow | undefined> {
    const now = Date.now();
    const hit = this.rows.get(slug);
    if (hit && now - hit.at < ROUTE_CACHE_MS) return hit.row;
    const row = await load();
    // Bounded, so requests for many unknown slugs cannot grow it without end.
    if (this.rows.size >= ROUTE_CACHE_MAX) this.rows.clear();
    this.rows.set(slug, { row, at: now });
    return row;
  }

  /** Every write of this process drops it (cheap: writes are rare next to requests), so this process never routes on a row it changed. */
  clear(): void {
    this.rows.clear();
  }
}
