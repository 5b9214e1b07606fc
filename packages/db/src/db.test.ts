import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq, sql } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { events, openDb, openPostgres, openSqlite, pgTables, projects, redactUrl, startTestPostgres, workspaces } from './index.ts';
import type { EventRow, NewWorkspaceRow, PgHandle, ProjectRow, SqliteHandle, TestPostgres, WorkspaceRow } from './index.ts';

let dir: string;
let handle: SqliteHandle | undefined;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'grove-db-'));
});
afterEach(async () => {
  await handle?.close();
  handle = undefined;
  rmSync(dir, { recursive: true, force: true });
});

const now = new Date().toISOString();
function row(slug: string, state: NewWorkspaceRow['state']): NewWorkspaceRow {
  return { slug, project: 'p', name: 'n', branch: 'grove/n', baseRef: 'main', state, createdAt: now, updatedAt: now };
}

describe('openSqlite', () => {
  it('is what openDb opens for a file', async () => {
    const h = await openDb({ file: join(dir, 'grove.db') });
    expect(h.dialect).toBe('sqlite');
    await h.close();
  });

  it('creates the parent directory, applies migrations and sets the pragmas', () => {
    const file = join(dir, 'nested', 'deeper', 'grove.db');
    handle = openSqlite({ file });
    expect(existsSync(file)).toBe(true);
    const tables = handle.db.all<{ name: string }>(sql`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`);
    expect(tables.map((t) => t.name)).toEqual(expect.arrayContaining(['events', 'projects', 'workspaces']));
    const indexes = handle.db.all<{ name: string }>(sql`SELECT name FROM sqlite_master WHERE type = 'index'`);
    expect(indexes.map((i) => i.name)).toEqual(expect.arrayContaining(['events_slug_id', 'workspaces_live_slug']));
    expect(handle.db.get<{ journal_mode: string }>(sql`PRAGMA journal_mode`)?.journal_mode).toBe('wal');
    expect(handle.db.get<{ foreign_keys: number }>(sql`PRAGMA foreign_keys`)?.foreign_keys).toBe(1);
    expect(handle.db.get<{ timeout: number }>(sql`PRAGMA busy_timeout`)?.timeout).toBe(5000);
    // synchronous=NORMAL is 1.
    expect(handle.db.get<{ synchronous: number }>(sql`PRAGMA synchronous`)?.synchronous).toBe(1);
  });

  it('is re-openable: migrations are applied once and data survives', async () => {
    const file = join(dir, 'grove.db');
    handle = openSqlite({ file });
    handle.db.insert(projects).values({ name: 'p', source: '/src', defaultBranch: 'main', createdAt: now }).run();
    await handle.close();
    handle = openSqlite({ file });
    expect(handle.db.select().from(projects).all()).toHaveLength(1);
  });

  it('stores event data as JSON and reads it back as an object', () => {
    handle = openSqlite({ file: join(dir, 'grove.db') });
    handle.db.insert(events).values({ slug: 'p~a', type: 'workspace.reserved', data: { branch: 'grove/a', ms: 3 }, at: now }).run();
    const [e] = handle.db.select().from(events).all();
    expect(e?.data).toEqual({ branch: 'grove/a', ms: 3 });
  });

  it('rejects a workspace for an unknown project (foreign keys are on)', () => {
    handle = openSqlite({ file: join(dir, 'grove.db') });
    const db = handle.db;
    expect(() => db.insert(workspaces).values(row('p~a', 'creating')).run()).toThrow(/FOREIGN KEY/);
  });
});

describe('live slug uniqueness', () => {
  it('rejects a second live row with the same slug, and allows it once the first is gone or failed', () => {
    handle = openSqlite({ file: join(dir, 'grove.db') });
    const db = handle.db;
    db.insert(projects).values({ name: 'p', source: '/src', defaultBranch: 'main', createdAt: now }).run();
    const first = db.insert(workspaces).values(row('p~a', 'running')).returning().get();

    for (const state of ['creating', 'running', 'stopped', 'tearing-down'] as const) {
      expect(() => db.insert(workspaces).values(row('p~a', state)).run()).toThrow(/UNIQUE/);
    }
    // A different slug is unaffected.
    db.insert(workspaces).values(row('p~b', 'creating')).run();

    db.update(workspaces).set({ state: 'gone' }).where(eq(workspaces.id, first.id)).run();
    const second = db.insert(workspaces).values(row('p~a', 'creating')).returning().get();
    db.update(workspaces).set({ state: 'failed' }).where(eq(workspaces.id, second.id)).run();
    db.insert(workspaces).values(row('p~a', 'stopped')).run();

    const rows = db.select().from(workspaces).where(eq(workspaces.slug, 'p~a')).all();
    expect(rows.map((r) => r.state).sort()).toEqual(['failed', 'gone', 'stopped']);
    // History rows may repeat freely.
    db.insert(workspaces).values(row('p~a', 'gone')).run();
    expect(db.select().from(workspaces).where(eq(workspaces.slug, 'p~a')).all()).toHaveLength(4);
  });
});

// The same registry on PostgreSQL (DATABASE_URL): a throwaway cluster for this file, a fresh database per test.
describe('openPostgres', () => {
  let cluster: TestPostgres;
  let pgHandle: PgHandle | undefined;
  beforeAll(async () => {
    cluster = await startTestPostgres();
  });
  afterAll(async () => {
    await cluster?.stop();
  });
  afterEach(async () => {
    await pgHandle?.close();
    pgHandle = undefined;
  });

  it('is what openDb opens for a url; migrations create the same tables, columns and indexes as in SQLite', async () => {
    const url = await cluster.createDatabase();
    const h = await openDb({ url });
    expect(h.dialect).toBe('postgres');
    if (h.dialect !== 'postgres') return;
    pgHandle = h;
    const pgCols = await h.db.execute<{ table_name: string; column_name: string; is_nullable: string }>(
      sql`SELECT table_name, column_name, is_nullable FROM information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, column_name`,
    );
    handle = openSqlite({ file: join(dir, 'grove.db') });
    const sqliteCols: string[] = [];
    for (const t of ['events', 'projects', 'workspaces']) {
      for (const c of handle.db.all<{ name: string; notnull: number; pk: number }>(sql.raw(`PRAGMA table_info(${t})`))) {
        sqliteCols.push(`${t}.${c.name} ${c.notnull || c.pk ? 'NO' : 'YES'}`);
      }
    }
    expect(pgCols.rows.map((r) => `${r.table_name}.${r.column_name} ${r.is_nullable}`).sort()).toEqual(sqliteCols.sort());
    const pgIdx = await h.db.execute<{ indexname: string }>(sql`SELECT indexname FROM pg_indexes WHERE schemaname = 'public'`);
    expect(pgIdx.rows.map((r) => r.indexname)).toEqual(expect.arrayContaining(['events_slug_id', 'workspaces_live_slug', 'workspaces_project', 'workspaces_queue']));
  });

  it('is re-openable, also by two processes at once: migrations are applied once and data survives', async () => {
    const url = await cluster.createDatabase();
    const [a, b] = await Promise.all([openPostgres({ url }), openPostgres({ url })]);
    await a.db.insert(pgTables.projects).values({ name: 'p', source: '/src', defaultBranch: 'main', createdAt: now });
    await a.close();
    await b.close();
    pgHandle = await openPostgres({ url });
    expect(await pgHandle.db.select().from(pgTables.projects)).toHaveLength(1);
    const applied = await pgHandle.db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations`);
    expect(applied.rows[0]?.n).toBe(1);
  });

  it('stores JSON and booleans as such, enforces foreign keys and the live-slug index', async () => {
    pgHandle = await openPostgres({ url: await cluster.createDatabase() });
    const db = pgHandle.db;
    await db.insert(pgTables.events).values({ slug: 'p~a', type: 'workspace.reserved', data: { branch: 'grove/a', ms: 3 }, at: now });
    const [e] = await db.select().from(pgTables.events);
    expect(e?.data).toEqual({ branch: 'grove/a', ms: 3 });
    await expect(db.insert(pgTables.workspaces).values(row('p~a', 'creating'))).rejects.toMatchObject({ cause: { code: '23503' } });
    await db.insert(pgTables.projects).values({ name: 'p', source: '/src', defaultBranch: 'main', createdAt: now });
    const [first] = await db.insert(pgTables.workspaces).values(row('p~a', 'running')).returning();
    expect(first?.isDefault).toBe(false);
    await expect(db.insert(pgTables.workspaces).values(row('p~a', 'queued'))).rejects.toMatchObject({ cause: { code: '23505' } });
    await db.update(pgTables.workspaces).set({ state: 'gone' }).where(eq(pgTables.workspaces.id, first?.id ?? 0));
    await db.insert(pgTables.workspaces).values(row('p~a', 'creating'));
    await db.insert(pgTables.workspaces).values(row('p~a', 'gone'));
    expect(await db.select().from(pgTables.workspaces).where(eq(pgTables.workspaces.slug, 'p~a'))).toHaveLength(3);
  });

  it('says what went wrong when the server cannot be reached', async () => {
    const url = cluster.url('postgres').replace(/host=[^&]+/, `host=${encodeURIComponent(join(dir, 'nothing-here'))}`);
    await expect(openPostgres({ url })).rejects.toThrow(/cannot open the PostgreSQL registry at postgres:\/\/grove@\/postgres/);
  });
});

// Core reads rows of either dialect through one type: the two schemas must infer the same row shapes.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const sameRows: [
  Same<WorkspaceRow, typeof pgTables.workspaces.$inferSelect>,
  Same<NewWorkspaceRow, typeof pgTables.workspaces.$inferInsert>,
  Same<ProjectRow, typeof pgTables.projects.$inferSelect>,
  Same<EventRow, typeof pgTables.events.$inferSelect>,
] = [true, true, true, true];
void sameRows;

describe('redactUrl', () => {
  it('hides the password and keeps the rest', () => {
    expect(redactUrl('postgres://grove:s3cr:et@db.example:5432/grove?sslmode=require')).toBe('postgres://grove:***@db.example:5432/grove?sslmode=require');
    expect(redactUrl('postgres://grove@/grove?host=/tmp/x')).toBe('postgres://grove@/grove?host=/tmp/x');
  });
});
