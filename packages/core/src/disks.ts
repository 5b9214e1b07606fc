/** The disk quota as users see it: each workspace's usage for the API, and workspace.disk_full when one fills. */
import { diskLevel } from '@grove/contracts';
import type { DiskUsage } from '@grove/contracts';
import type { WorkspaceRow } from '@grove/db';
import { reasonOf } from './context.ts';
import type { GroveContext } from './context.ts';
import { LIVE_STATES } from './registry.ts';
import type { Volumes } from './volume.ts';

/** How often the disk quota of running workspaces is read, so workspace.disk_full is recorded when it fills. */
const DEFAULT_DISK_WATCH_MS = 15_000;

export class DiskWatch {
  /** Slugs whose disk was full at the last look: workspace.disk_full is recorded once per crossing. */
  private readonly full = new Set<string>();
  private readonly timer: NodeJS.Timeout | null = null;

  /** volumes null: no quota applies, and every usage is unknown. */
  constructor(
    private readonly ctx: GroveContext,
    private readonly volumes: Volumes | null,
  ) {
    if (!volumes) return;
    this.timer = setInterval(() => void this.watch(), ctx.opts.diskWatchMs ?? DEFAULT_DISK_WATCH_MS);
    this.timer.unref();
  }

  /** Disk usage of the given rows' images, live ones only (a failed or gone row has none). */
  async usageOf(rows: readonly WorkspaceRow[]): Promise<Map<string, DiskUsage>> {
    if (!this.volumes) return new Map();
    const live = rows.filter((r) => (LIVE_STATES as readonly string[]).includes(r.state)).map((r) => r.slug);
    const disks = await this.volumes.usageOf(live);
    for (const r of rows) {
      const d = disks.get(r.slug);
      if (d) this.note(r, d);
    }
    return disks;
  }

  /** The slug's image is gone (teardown): a later workspace of that slug starts with no full mark. */
  forget(slug: string): void {
    this.full.delete(slug);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** Read every running workspace's disk, so a quota that fills is recorded without anyone asking. */
  private async watch(): Promise<void> {
    if (this.ctx.closed) return;
    try {
      await this.usageOf(await this.ctx.store.rows({ states: ['running'] }));
    } catch (e) {
      this.ctx.log.warn({ err: e }, `disk quota check failed: ${reasonOf(e)}`);
    }
  }

  /** workspace.disk_full when the disk becomes full (once, until it has room again). */
  private note(row: WorkspaceRow, d: DiskUsage): void {
    const { level, by } = diskLevel(d);
    if (level !== 'full') {
      this.full.delete(row.slug);
      return;
    }
    if (this.full.has(row.slug)) return;
    this.full.add(row.slug);
    this.ctx.log.warn({ slug: row.slug, by, ...d }, `the disk quota of ${row.slug} is used up (${by})`);
    this.ctx.emitSoon(row.slug, 'workspace.disk_full', { workspaceId: row.id, by, ...d });
  }
}
