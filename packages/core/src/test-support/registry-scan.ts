// Test support: everything the SQLite registry holds, for "this secret is nowhere" checks. The registry runs in
// WAL mode, so a row written a moment ago may sit in grove.db-wal and not yet in grove.db: reading grove.db's
// bytes alone would miss it. This reads every cell of every table through SQL, on a connection of its own
// (which sees the WAL), and also returns the raw bytes of grove.db, grove.db-wal and grove.db-shm.
import { existsSync, readFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import { openSqlite } from '@grove/db';

export interface RegistryScan {
  /** Tables read (sqlite_master), so a check can see the scan read something. */
  tables: string[];
  /** Text and blob cells read. */
  cells: number;
  /** Every text and blob cell, one per line (blobs as latin1). */
  text: string;
  /** The bytes of grove.db, grove.db-wal and grove.db-shm, those that exist, one after another. */
  raw: Buffer;
  /** Which of the three files existed. */
  files: string[];
}

export async function scanRegistry(file: string): Promise<RegistryScan> {
  const handle = openSqlite({ file });
  try {
    const db = handle.db;
    const tables = db.all<{ name: string }>(sql`SELECT name FROM sqlite_master WHERE type = 'table'`).map((t) => t.name);
    const cells: string[] = [];
    for (const table of tables) {
      const rows = db.all<Record<string, unknown>>(sql`SELECT * FROM ${sql.identifier(table)}`);
      for (const row of rows) {
        for (const v of Object.values(row)) {
          if (typeof v === 'string') cells.push(v);
          else if (Buffer.isBuffer(v)) cells.push(v.toString('latin1'));
        }
      }
    }
    const files = [file, `${file}-wal`, `${file}-shm`].filter((f) => existsSync(f));
    return { tables, cells: cells.length, text: cells.join('\n'), raw: Buffer.concat(files.map((f) => readFileSync(f))), files };
  } finally {
    await handle.close();
  }
}
