import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq, sql } from 'drizzle-orm';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { events, openDb, projects, workspaces } from './index.ts';
import type { DbHandle, NewWorkspaceRow } from './index.ts';

let dir: string;
let handle: DbHandle | undefined;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'grove-db-'));
});
afterEach(() => {
  handle?.close();
  handle = undefined;
  rmSync(dir, { recursive: true, force: true });
});

const now = new Date().toISOString();
function row(slug: string, state: NewWorkspaceRow['state']): NewWorkspaceRow {
  return { slug, project: 'p', name: 'n', branch: 'grove/n', baseRef: 'main', state, createdAt: now, updatedAt: now };
}

describe('openDb', () => {
  it('creates the parent directory, applies migrations and sets the pragmas', () => {
    const file = join(dir, 'nested', 'deeper', 'grove.db');
    handle = openDb({ file });
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

  it('is re-openable: migrations are applied once and data survives', () => {
    const file = join(dir, 'grove.db');
    handle = openDb({ file });
    handle.db.insert(projects).values({ name: 'p', source: '/src', defaultBranch: 'main', createdAt: now }).run();
    handle.close();
    handle = openDb({ file });
    expect(handle.db.select().from(projects).all()).toHaveLength(1);
  });

  it('stores event data as JSON and reads it back as an object', () => {
    handle = openDb({ file: join(dir, 'grove.db') });
    handle.db.insert(events).values({ slug: 'p~a', type: 'workspace.reserved', data: { branch: 'grove/a', ms: 3 }, at: now }).run();
    const [e] = handle.db.select().from(events).all();
    expect(e?.data).toEqual({ branch: 'grove/a', ms: 3 });
  });

  it('rejects a workspace for an unknown project (foreign keys are on)', () => {
    handle = openDb({ file: join(dir, 'grove.db') });
    const db = handle.db;
    expect(() => db.insert(workspaces).values(row('p~a', 'creating')).run()).toThrow(/FOREIGN KEY/);
  });
});

describe('live slug uniqueness', () => {
  it('rejects a second live row with the same slug, and allows it once the first is gone or failed', () => {
    handle = openDb({ file: join(dir, 'grove.db') });
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
