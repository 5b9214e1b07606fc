// @grove/db: the registry's drizzle schema, migrations and openDb(); the only package that opens the database.
export * from './schema.ts';
export { openDb } from './open.ts';
export type { Db, DbHandle, OpenDbOptions } from './open.ts';
