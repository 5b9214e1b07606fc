// The disk line of a workspace card: its quota and what of it is used, a warning near the top, what to do when full.
import { diskLevel } from '@grove/contracts';
import type { DiskUsage } from '@grove/contracts';

const GIB = 1024 ** 3;
const MIB = 1024 ** 2;

/** 1.2 GiB, 512 MiB, 0 MiB: one decimal under 10, none above; binary units, as the quota is set. */
export function formatBytes(n: number): string {
  const [v, unit] = n >= GIB ? [n / GIB, 'GiB'] : [n / MIB, 'MiB'];
  const s = v < 10 ? v.toFixed(1).replace(/\.0$/, '') : Math.round(v).toString();
  return `${s} ${unit}`;
}

/** 180k, 1.2k, 950: how many files. */
export function formatCount(n: number): string {
  if (n < 1000) return String(n);
  const k = n / 1000;
  return `${k < 10 ? k.toFixed(1).replace(/\.0$/, '') : Math.round(k).toString()}k`;
}

export interface DiskLine {
  level: 'ok' | 'warn' | 'full';
  /** "1.2 / 4 GiB" (and the files when they are what runs out). */
  text: string;
  /** Said under the line when it is nearly or entirely full; null otherwise. */
  advice: string | null;
}

/**
 * "1.2 / 4 GiB": the used figure in the total's unit when the total is in GiB, so the two read together; under
 * 0.1 GiB it keeps its own unit ("16 MiB / 4 GiB"), since "0 / 4 GiB" reads as an empty checkout.
 */
function bytesPair(used: number, total: number): string {
  if (total < GIB) return `${formatBytes(used).replace(/ MiB$/, '')} / ${formatBytes(total)}`;
  if (used < 0.1 * GIB) return `${formatBytes(used)} / ${formatBytes(total)}`;
  const u = used / GIB;
  return `${u < 10 ? u.toFixed(1).replace(/\.0$/, '') : Math.round(u).toString()} / ${formatBytes(total)}`;
}

export function diskLine(d: DiskUsage): DiskLine {
  const { level, by } = diskLevel(d);
  const files = `${formatCount(d.usedInodes)} / ${formatCount(d.totalInodes)} files`;
  const bytes = bytesPair(d.usedBytes, d.totalBytes);
  const text = by === 'inodes' ? `${bytes}, ${files}` : bytes;
  if (level === 'full') {
    const what = by === 'inodes' ? 'no file can be created' : 'no room is left';
    return {
      level,
      text,
      advice: `Disk full: ${what}, so the agent's writes fail ("No space left on device"). Delete build output or caches in the workspace, or tear it down (its work is saved first).`,
    };
  }
  if (level === 'warn') {
    const pct = Math.floor((by === 'inodes' ? d.usedInodes / d.totalInodes : d.usedBytes / d.totalBytes) * 100);
    return { level, text, advice: `${pct}% of the ${by === 'inodes' ? 'file' : 'disk'} quota used: writes fail once it is full.` };
  }
  return { level, text, advice: null };
}
