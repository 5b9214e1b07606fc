import { describe, expect, it } from 'vitest';
import { diskLine, formatBytes, formatCount } from './disk.ts';

const GIB = 1024 ** 3;
const MIB = 1024 ** 2;

describe('the disk line on the card', () => {
  it('formats sizes and counts the way the quota is set (binary units)', () => {
    expect(formatBytes(4 * GIB)).toBe('4 GiB');
    expect(formatBytes(1.25 * GIB)).toBe('1.3 GiB');
    expect(formatBytes(512 * MIB)).toBe('512 MiB');
    expect(formatBytes(0)).toBe('0 MiB');
    expect(formatCount(950)).toBe('950');
    expect(formatCount(1_200)).toBe('1.2k');
    expect(formatCount(200_000)).toBe('200k');
  });

  it('reads "1.2 / 4 GiB" with nothing to say below 90%', () => {
    expect(diskLine({ usedBytes: 1.2 * GIB, totalBytes: 4 * GIB, usedInodes: 900, totalInodes: 200_000 })).toEqual({ level: 'ok', text: '1.2 / 4 GiB', advice: null });
    expect(diskLine({ usedBytes: 20 * MIB, totalBytes: 512 * MIB, usedInodes: 9, totalInodes: 20_000 }).text).toBe('20 / 512 MiB');
    // A fresh checkout under a GiB quota: its MiB, not "0 / 3.9 GiB".
    expect(diskLine({ usedBytes: 16 * MIB, totalBytes: 3.9 * GIB, usedInodes: 23, totalInodes: 200_000 }).text).toBe('16 MiB / 3.9 GiB');
    expect(diskLine({ usedBytes: 0, totalBytes: 4 * GIB, usedInodes: 0, totalInodes: 200_000 }).text).toBe('0 MiB / 4 GiB');
    expect(diskLine({ usedBytes: 0.1 * GIB, totalBytes: 4 * GIB, usedInodes: 9, totalInodes: 200_000 }).text).toBe('0.1 / 4 GiB');
  });

  it('warns from 90% of the bytes or of the files', () => {
    const bytes = diskLine({ usedBytes: 3.7 * GIB, totalBytes: 4 * GIB, usedInodes: 10, totalInodes: 200_000 });
    expect(bytes.level).toBe('warn');
    expect(bytes.advice).toBe('92% of the disk quota used: writes fail once it is full.');
    const files = diskLine({ usedBytes: GIB, totalBytes: 4 * GIB, usedInodes: 185_000, totalInodes: 200_000 });
    expect(files).toMatchObject({ level: 'warn', text: '1 / 4 GiB, 185k / 200k files' });
    expect(files.advice).toMatch(/^92% of the file quota/);
  });

  it('says "Disk full" with what fails and what to do, by bytes or by files', () => {
    const full = diskLine({ usedBytes: 4 * GIB - MIB, totalBytes: 4 * GIB, usedInodes: 10, totalInodes: 200_000 });
    expect(full.level).toBe('full');
    expect(full.advice).toMatch(/^Disk full: no room is left, so the agent's writes fail \("No space left on device"\)\. Delete build output/);
    const inodes = diskLine({ usedBytes: GIB, totalBytes: 4 * GIB, usedInodes: 200_000, totalInodes: 200_000 });
    expect(inodes).toMatchObject({ level: 'full', text: '1 / 4 GiB, 200k / 200k files' });
    expect(inodes.advice).toMatch(/^Disk full: no file can be created/);
  });
});
