// Whether dist/grove.mjs may run: it exists and none of the files it was built from (dist/inputs.json, written by
// bundle.mjs) is newer than it or gone. Shared by bin/grove.mjs and bundle.mjs.
import { readFileSync, statSync } from 'node:fs';

/** `base`: the package's directory (a file: URL ending in /); another one only in tests. */
export function bundleIsFresh(base = new URL('.', import.meta.url)) {
  try {
    const built = statSync(new URL('dist/grove.mjs', base)).mtimeMs;
    const { inputs } = JSON.parse(readFileSync(new URL('dist/inputs.json', base), 'utf8'));
    return Array.isArray(inputs) && inputs.length > 0 && inputs.every((p) => typeof p === 'string' && statSync(new URL(p, base)).mtimeMs <= built);
  } catch {
    // No bundle, an unreadable list, or an input gone.
    return false;
  }
}
