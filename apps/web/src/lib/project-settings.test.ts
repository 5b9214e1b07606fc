// The Project settings dialog's words and its in-page notice of the project's keep setting.
import { describe, expect, it } from 'vitest';
import { DEFAULT_OVERLAY_FILES, type ProjectConfig } from '@grove/contracts';
import { announceProjectKeep, byPath, onProjectKeep, overlayEntries, overlayModeLabel, plainEntries, sizeLabel } from './project-settings.ts';

describe('sizeLabel', () => {
  it('counts bytes, then KiB and MiB with one decimal while it means something', () => {
    expect(sizeLabel(0)).toBe('0 B');
    expect(sizeLabel(1023)).toBe('1023 B');
    expect(sizeLabel(1024)).toBe('1 KiB');
    expect(sizeLabel(1536)).toBe('1.5 KiB');
    expect(sizeLabel(150 * 1024 + 300)).toBe('150 KiB');
    expect(sizeLabel(1024 * 1024)).toBe('1 MiB');
  });
});

describe('overlay files in words', () => {
  it('says how a workspace gets each file, sorted by path', () => {
    expect(overlayModeLabel({ writable: false })).toBe('mounted read-only');
    expect(overlayModeLabel({ writable: true })).toBe('copied at fork, writable');
    const files = [
      { path: '.envrc', writable: false, size: 1 },
      { path: '.claude/settings.local.json', writable: true, size: 2 },
      { path: '.env', writable: false, size: 3 },
    ];
    expect(byPath(files).map((f) => f.path)).toEqual(['.claude/settings.local.json', '.env', '.envrc']);
    // The list from the API is left as it was.
    expect(files[0]?.path).toBe('.envrc');
  });

  it('names the entries the project takes: its own, else the defaults; globs are not suggested as paths', () => {
    expect(overlayEntries({})).toEqual({ files: DEFAULT_OVERLAY_FILES, writable: [], isDefault: true });
    const own: ProjectConfig = { overlay: { files: ['config/*.local.yml', '.env'], writable: ['.env'] } };
    expect(overlayEntries(own)).toEqual({ files: ['config/*.local.yml', '.env'], writable: ['.env'], isDefault: false });
    expect(plainEntries(DEFAULT_OVERLAY_FILES)).toEqual(['.claude/settings.local.json', '.mcp.json', '.env', '.envrc']);
    expect(plainEntries(['a/b?.txt', 'c'])).toEqual(['c']);
  });
});

describe('announceProjectKeep', () => {
  it('reaches every listener until it unsubscribes', () => {
    const heard: Array<[string, boolean]> = [];
    const off = onProjectKeep((p, k) => heard.push([p, k]));
    announceProjectKeep('app', true);
    off();
    announceProjectKeep('app', false);
    expect(heard).toEqual([['app', true]]);
  });
});
