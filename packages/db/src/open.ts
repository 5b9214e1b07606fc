import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import type { BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { migrate } from 'drizzle-orm/better-sqlite3/migrator';
import * as schema from './schema.ts';

export type Db = BetterSQLite3Database<typeof schema>;

export interface OpenDbOptions {
  /** Path of the SQLite file; its parent directory is created. */
  file: string;
  /** Where the drizzle-kit migrations live; defaults to this package's drizzle/ (override when bundled). */
  migrationsFolder?: string;
}

export interface DbHandle {
  db: Db;
  close(): void;
}

const DEFAULT_MIGRATIONS = fileURLToPath(new URL('../drizzle', import.meta.url));

/** Open (and create) the registry database, apply pending migrations, and return the drizzle handle. */
export function openDb(opts: OpenDbOptions): DbHandle {
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
    migrate(db, { migrationsFolder: opts.migrationsFolder ?? DEFAULT_MIGRATIONS });
    return {
      db,
      close: () => {
        if (sqlite.open) sqlite.close();
      },
    };
  } catch (e) {
    sqlite.close();
    throw e;
  }
}
