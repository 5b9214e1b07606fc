// @grove/db: the registry's drizzle schema (SQLite, and PostgreSQL by URL), migrations and openDb(); the only package that opens the database.
export * from './schema.ts';
export * as pgTables from './schema-pg.ts';
export { openDb, openPostgres, openSqlite, redactUrl } from './open.ts';
export type { Db, DbHandle, OpenDbOptions, PgDb, PgHandle, PgSession, PostgresOptions, SqliteHandle, SqliteOptions } from './open.ts';
export { startTestPostgres } from './test-postgres.ts';
export type { TestPostgres } from './test-postgres.ts';
