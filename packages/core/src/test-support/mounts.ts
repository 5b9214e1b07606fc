// Test helper: the mounts a test made under a directory, and their removal (what a reboot does to them).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Mount points below root, in mount order. */
export function mountsUnder(root: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .filter((p) => p.startsWith(`${root}/`));
}

/** Unmount everything below root, newest first, so no loop device outlives a test; `lazy` detaches busy ones. */
export function unmountAll(root: string, o: { lazy?: boolean } = {}): void {
  for (const p of mountsUnder(root).reverse()) execFileSync('umount', [...(o.lazy ? ['-l'] : []), '--', p]);
}
