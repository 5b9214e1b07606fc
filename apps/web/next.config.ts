// Next.js config for the dashboard. The server mounts this app by Next's public API, so no custom server here.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NextConfig } from 'next';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const config: NextConfig = {
  // @grove/contracts and @grove/client ship TypeScript source (with .ts import extensions), not a build.
  transpilePackages: ['@grove/contracts', '@grove/client'],
  // The monorepo root holds the lockfile and node_modules; say so instead of letting Next guess.
  turbopack: { root },
  outputFileTracingRoot: root,
  poweredByHeader: false,
  reactStrictMode: true,
};

export default config;
