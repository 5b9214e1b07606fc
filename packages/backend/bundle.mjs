// Builds dist/backend.mjs: the backend and all its dependencies (zod, ws, @grove/contracts) in one
// ESM file for Node 18, copied into the sandbox image and run as `node /opt/grove/backend.mjs`.
import { build } from 'esbuild';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const outfile = join(here, 'dist', 'backend.mjs');

const result = await build({
  entryPoints: [join(here, 'src', 'main.ts')],
  outfile,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node18',
  // ws loads its optional native helpers with require() inside try/catch; leave them out (they are not installed)
  // and give the ESM bundle a real `require` for those calls and for ws's CommonJS requires of node builtins.
  external: ['bufferutil', 'utf-8-validate'],
  banner: { js: "import { createRequire as __groveCreateRequire } from 'node:module';\nconst require = __groveCreateRequire(import.meta.url);" },
  legalComments: 'eof',
  logLevel: 'warning',
  metafile: true,
});

const bytes = result.metafile.outputs[Object.keys(result.metafile.outputs)[0]].bytes;
console.log(`bundled ${outfile} (${(bytes / 1024).toFixed(0)} KiB)`);
