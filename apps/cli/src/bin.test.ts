// The `grove` executable as a process: when its one-file bundle runs (and when the sources do), and what it does when
// the reader of its output goes away early.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { bundleIsFresh } from '../bundle-state.mjs';

const bin = path.resolve(import.meta.dirname, '../bin/grove.mjs');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'grove-cli-bin-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('the bundle', () => {
  /** A package dir with src/a.ts and a bundle built from it at `builtAt` (seconds since the epoch). */
  function pkg(name: string, builtAt: number, inputs: unknown = ['src/a.ts']) {
    const base = path.join(dir, name);
    fs.mkdirSync(path.join(base, 'src'), { recursive: true });
    fs.mkdirSync(path.join(base, 'dist'), { recursive: true });
    fs.writeFileSync(path.join(base, 'src', 'a.ts'), 'export {};\n');
    fs.utimesSync(path.join(base, 'src', 'a.ts'), 1_000, 1_000);
    fs.writeFileSync(path.join(base, 'dist', 'grove.mjs'), '');
    fs.writeFileSync(path.join(base, 'dist', 'inputs.json'), JSON.stringify({ inputs }));
    fs.utimesSync(path.join(base, 'dist', 'grove.mjs'), builtAt, builtAt);
    return { base, url: pathToFileURL(`${base}/`) };
  }

  it('runs while no input is newer than it, and not once one is, or is gone, or the list is not one', () => {
    const p = pkg('fresh', 2_000);
    expect(bundleIsFresh(p.url)).toBe(true);
    // An edited source is newer than the bundle: the sources run, never the stale bundle.
    fs.utimesSync(path.join(p.base, 'src', 'a.ts'), 3_000, 3_000);
    expect(bundleIsFresh(p.url)).toBe(false);
    const gone = pkg('gone', 2_000, ['src/a.ts', 'src/b.ts']);
    expect(bundleIsFresh(gone.url)).toBe(false);
    expect(bundleIsFresh(pkg('empty', 2_000, []).url)).toBe(false);
    expect(bundleIsFresh(pkg('not-a-list', 2_000, 'src/a.ts').url)).toBe(false);
    fs.rmSync(path.join(p.base, 'dist', 'grove.mjs'));
    expect(bundleIsFresh(p.url)).toBe(false);
  });
});

describe('the executable', () => {
  it('ends quietly with 0 when the reader of its output goes away (grove --help | head -1)', async () => {
    const child = spawn(process.execPath, [bin, '--help'], { stdio: ['ignore', 'pipe', 'pipe'] });
    // Closed before the CLI writes a byte: its first write meets a pipe nobody reads.
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
  });
});
