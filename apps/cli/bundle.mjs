// Builds dist/grove.mjs: the CLI and its dependencies in one ESM file, so `grove` starts without compiling
// TypeScript each time (about 0.3 s instead of 0.9 s). bin/grove.mjs runs it while no input is newer than it (the
// inputs are listed in dist/inputs.json; bundle-state.mjs), else the sources through tsx. Run by scripts/setup.sh
// with --if-stale. The bundle sits at the same depth as src/, so server-process.ts's repoRoot finds the clone alike.
import { build } from 'esbuild';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleIsFresh } from './bundle-state.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, 'dist');
const root = resolve(here, '../..');

// `--if-stale` (setup): a bundle that is still fresh is left as it is.
if (process.argv.includes('--if-stale') && bundleIsFresh()) {
  console.log('CLI bundle up to date');
  process.exit(0);
}

const result = await build({
  entryPoints: [join(here, 'src', 'main.ts')],
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  // commander is CommonJS: the ESM bundle gets a real `require` for its requires of node builtins.
  banner: { js: "import { createRequire as __groveCreateRequire } from 'node:module';\nconst require = __groveCreateRequire(import.meta.url);" },
  legalComments: 'eof',
  logLevel: 'warning',
  metafile: true,
  write: false,
  absWorkingDir: root,
});

mkdirSync(dist, { recursive: true });
const [out] = result.outputFiles;
if (!out) throw new Error('esbuild wrote nothing');
// Each file written beside its final name, then renamed over it: a `grove` starting meanwhile reads a whole file.
const put = (name, contents) => {
  const tmp = join(dist, `.${name}.${process.pid}`);
  writeFileSync(tmp, contents);
  renameSync(tmp, join(dist, name));
};
// Paths relative to this package, so bin/grove.mjs can check them wherever the clone is.
const inputs = Object.keys(result.metafile.inputs).map((p) => relative(here, resolve(root, p)));
put('grove.mjs', out.contents);
put('inputs.json', `${JSON.stringify({ inputs }, null, 1)}\n`);
console.log(`bundled ${relative(root, join(dist, 'grove.mjs'))} (${(out.contents.length / 1024).toFixed(0)} KiB, ${inputs.length} inputs)`);
