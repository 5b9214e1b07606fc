// @grove/contracts: the zod schemas of every API body, event and thread line; the only source of API types.
export * from './names.ts';
export * from './errors.ts';
export * from './workspace.ts';
export * from './thread.ts';
export * from './egress.ts';
export * from './agent.ts';
export * from './turns.ts';
export * from './teardown.ts';
export * from './git-flow.ts';
export * from './sandbox-runtime.ts';
export * from './pool.ts';
export * from './endpoints.ts';
export * from './terminal.ts';
export * from './files.ts';
