#!/usr/bin/env node
// The `grove` command: runs the TypeScript entry through tsx.
import { register } from 'tsx/esm/api';

register();
const { run } = await import('../src/main.ts');
process.exitCode = await run(process.argv.slice(2));
