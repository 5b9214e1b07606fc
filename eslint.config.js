// Lint for the whole monorepo: typescript-eslint recommended, plus the architecture rules
// (dockerode only in packages/sandbox, process.env only in env.ts files, apps never import apps, core behind its runtime).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/node_modules/**', '**/dist/**', '**/.next/**', 'docker/build/**', '**/next-env.d.ts', 'packages/db/drizzle/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', Buffer: 'readonly', URL: 'readonly', fetch: 'readonly', AbortController: 'readonly', TextEncoder: 'readonly', TextDecoder: 'readonly', structuredClone: 'readonly', queueMicrotask: 'readonly', setImmediate: 'readonly' } },
    rules: {
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-imports': ['error', {
        paths: [{ name: 'dockerode', message: 'Only packages/sandbox talks to Docker.' }],
        patterns: [{ group: ['**/apps/*', '@grove/server', '@grove/web', '@grove/cli'], message: 'Apps depend on packages, never on each other.' }],
      }],
      'no-restricted-properties': ['error', { object: 'process', property: 'env', message: 'Read configuration through the env.ts of your app or package.' }],
    },
  },
  { files: ['packages/sandbox/**'], rules: { 'no-restricted-imports': 'off' } },
  // Host git runs over trees the agent writes: only git-exec.ts may start it (fresh environment, explicit GIT_DIR,
  // neutered config, deadline). The other modules that start processes run no git (git-exec.test.ts checks):
  // fsutil.ts runs coreutils `chown -R -h -P` (fts with fchownat relative to directory fds: no link followed, even
  // mid-walk), volume.ts the disk-image tools.
  {
    files: ['packages/core/src/**/*.ts'],
    ignores: ['packages/core/src/**/*.test.ts', 'packages/core/src/test-support/**', 'packages/core/src/git-exec.ts', 'packages/core/src/fsutil.ts', 'packages/core/src/volume.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        paths: [
          { name: 'dockerode', message: 'Only packages/sandbox talks to Docker.' },
          { name: 'simple-git', message: 'Host git goes through packages/core/src/git-exec.ts.' },
          { name: 'node:child_process', message: 'Host git goes through packages/core/src/git-exec.ts; core starts no other process.' },
          { name: 'child_process', message: 'Host git goes through packages/core/src/git-exec.ts; core starts no other process.' },
        ],
        patterns: [{ group: ['**/apps/*', '@grove/server', '@grove/web', '@grove/cli'], message: 'Apps depend on packages, never on each other.' }],
      }],
    },
  },
  // Core decides and records; where a workspace runs is its WorkspaceRuntime's (@grove/runtime, docs/architecture.md,
  // "The runtime seam"): core touches no container (the sandbox driver), builds no gate or relay, and opens no socket
  // server of its own. Type imports stay allowed (the shapes are shared); this holds for every core module.
  {
    files: ['packages/core/src/**/*.ts'],
    ignores: ['packages/core/src/**/*.test.ts', 'packages/core/src/test-support/**'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        paths: [
          ...['@grove/sandbox', '@grove/egress'].map((name) => ({ name, allowTypeImports: true, message: 'Core reaches sandboxes, gates and relays only through its WorkspaceRuntime (@grove/runtime).' })),
          ...['node:net', 'net', 'node:http', 'http', 'node:https', 'https', 'node:tls', 'tls', 'node:dgram', 'dgram', 'node:http2', 'http2'].map((name) => ({
            name,
            allowTypeImports: true,
            message: 'Core opens no sockets: listeners and backend calls live in @grove/runtime (getOverSocket for host-to-backend calls).',
          })),
        ],
      }],
    },
  },
  // Benchmarks measure the apps themselves, so they may import them (but still not dockerode).
  { files: ['bench/**'], rules: { 'no-restricted-imports': ['error', { paths: [{ name: 'dockerode', message: 'Only packages/sandbox talks to Docker.' }] }] } },
  { files: ['**/env.ts', '**/*.test.ts', 'e2e/**', 'bench/**', 'scripts/**', '**/*.config.*'], rules: { 'no-restricted-properties': 'off' } },
);
