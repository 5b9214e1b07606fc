import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import type { BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { migrate } from 'drizzle-orm/better-sqlite3/migrator';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import type { NodePgDatabase } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import pg from 'pg';
import * as schema from './schema.ts';
import * as pgSchema from './schema-pg.ts';

/** The SQLite registry (the embedded default). */
export type Db = BetterSQLite3Database<typeof schema>;
/** The PostgreSQL registry (DATABASE_URL). */
export type PgDb = NodePgDatabase<typeof pgSchema>;

export interface SqliteOptions {
  /** Path of the SQLite file; its parent directory is created. */
  file: string;
  /** Where the drizzle-kit migrations live; defaults to this package's drizzle/ (override when bundled). */
  migrationsFolder?: string;
}

export interface PostgresOptions {
  /** postgres:// or postgresql:// URL (a Unix socket directory goes in `?host=/dir`). */
  url: string;
  /** Defaults to this package's drizzle-pg/. */
  migrationsFolder?: string;
  /** Connections in this process's pool; default 10. */
  poolSize?: number;
  /**
   * Connections for sessions (PgHandle.session), kept apart from the query pool: a session is held for as long as
   * a workspace operation runs, so holding them from the query pool could starve the queries those operations make.
   * Default 16.
   */
  sessionPoolSize?: number;
  /** An idle pooled connection failed (the server restarted, the network dropped); the pool replaces it. */
  onPoolError?: (err: Error) => void;
}

export type OpenDbOptions = SqliteOptions | PostgresOptions;

export interface SqliteHandle {
  dialect: 'sqlite';
  db: Db;
  close(): Promise<void>;
}

/** One connection of its own, for session-scoped state (advisory locks held across statements and transactions). */
export interface PgSession {
  /** Drizzle over this connection only: its transactions and statements all run on this session. */
  db: PgDb;
  /** Give the connection back; `destroy` closes it instead (its session-level locks end with it). Call once. */
  release(destroy?: boolean): void;
}

export interface PgHandle {
  dialect: 'postgres';
  db: PgDb;
  /** A dedicated connection from the session pool (waits when all are out). */
  session(): Promise<PgSession>;
  close(): Promise<void>;
}

export type DbHandle = SqliteHandle | PgHandle;

const SQLITE_MIGRATIONS = fileURLToPath(new URL('../drizzle', import.meta.url));
const PG_MIGRATIONS = fileURLToPath(new URL('../drizzle-pg', import.meta.url));
/** pg_advisory_lock key that serializes migrations of one database by several servers starting at once ("grove mig"). */
const MIGRATION_LOCK = 0x67726f76656d6967n;

/**
 * Open the registry: a PostgreSQL database when given a url, else the SQLite file (created). Pending migrations of
 * that dialect are applied. The one place that picks the dialect.
 */
export async function openDb(opts: OpenDbOptions): Promise<DbHandle> {
  return 'url' in opts ? openPostgres(opts) : openSqlite(opts);
}

/** Open (and create) a SQLite registry synchronously; for tools and tests that work on the file itself. */
export function openSqlite(opts: SqliteOptions): SqliteHandle {
  const file = resolve(opts.file);
  mkdirSync(dirname(file), { recursive: true });
  const sqlite = new Database(file);
  try {
    // WAL lets readers (list, socketFor) proceed while a fork holds the write lock; busy_timeout makes a
    // second process wait instead of failing with SQLITE_BUSY.
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('busy_timeout = 5000');
    sqlite.pragma('foreign_keys = ON');
    sqlite.pragma('synchronous = NORMAL');
    const db = drizzle(sqlite, { schema });
    migrate(db, { migrationsFolder: opts.migrationsFolder ?? SQLITE_MIGRATIONS });
    return {
      dialect: 'sqlite',
      db,
      close: async () => {
        if (sqlite.open) sqlite.close();
      },
    };
  } catch (e) {
    sqlite.close();
    throw e;
  }
}

/** Open a PostgreSQL registry: a connection pool, migrated under an advisory lock. */
export async function openPostgres(opts: PostgresOptions): Promise<PgHandle> {
  const pool = new pg.Pool({ connectionString: opts.url, max: opts.poolSize ?? 10 });
  // Without a listener an idle client's error would be an uncaught 'error' event and end the process.
  pool.on('error', (err) => opts.onPoolError?.(err));
  try {
    const client = await pool.connect();
    try {
      // Two servers starting together would both see the migrations table empty and both create the tables.
      await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK.toString()]);
      try {
        await migratePg(drizzlePg(client, { schema: pgSchema }), { migrationsFolder: opts.migrationsFolder ?? PG_MIGRATIONS });
      } finally {
        await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK.toString()]);
      }
    } finally {
      client.release();
    }
  } catch (e) {
    await pool.end().catch(() => undefined);
    throw new Error(`cannot open the PostgreSQL registry at ${redactUrl(opts.url)}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
  const sessions = new pg.Pool({ connectionString: opts.url, max: opts.sessionPoolSize ?? 16 });
  sessions.on('error', (err) => opts.onPoolError?.(err));
  let closed = false;
  return {
    dialect: 'postgres',
    db: drizzlePg(pool, { schema: pgSchema }),
    session: async () => {
      const client = await sessions.connect();
      // A checked-out client has no pool listener: without this, its connection dropping (the server restarting
      // while a lock is held) would be an uncaught 'error' event. Its next query fails, and the holder closes it.
      const onError = (err: Error): void => opts.onPoolError?.(err);
      client.on('error', onError);
      return {
        db: drizzlePg(client, { schema: pgSchema }),
        release: (destroy) => {
          client.off('error', onError);
          client.release(destroy === true);
        },
      };
    },
    close: async () => {
      if (closed) return;
      closed = true;
      await Promise.all([pool.end(), sessions.end()]);
    },
  };
}

/** The URL without its password, for messages (a regex: a socket URL such as postgres://u@/db?host=/dir is no WHATWG URL). */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z]+:\/\/[^:@/]*):[^@/]*@/i, '$1:***@');
}
