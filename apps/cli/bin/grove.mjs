#!/usr/bin/env node
// The `grove` command: runs dist/grove.mjs (bundle.mjs, built by setup) while none of its inputs is newer than it,
// else the TypeScript entry through tsx, so an edited source is never shadowed by a stale bundle.
import { bundleIsFresh } from '../bundle-state.mjs';

// A reader that stops early (`grove ls | head -1`) closes the pipe: that ends the output, it is not a failure.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err) => {
    if (err.code !== 'EPIPE') throw err;
    process.exit(process.exitCode ?? 0);
  });
}

let run;
if (bundleIsFresh()) {
  ({ run } = await import('../dist/grove.mjs'));
} else {
  const { register } = await import('tsx/esm/api');
  register();
  ({ run } = await import('../src/main.ts'));
}
process.exitCode = await run(process.argv.slice(2));
