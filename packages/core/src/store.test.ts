// The line for a slot in the registry alone: enqueue, positions, FIFO promotion under the cap, no jumping.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqlite } from '@grove/db';
import type { SqliteHandle } from '@grove/db';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Store, capacityError, slotFree, toWorkspace } from './store.ts';

let dir: string;
let handle: SqliteHandle;
let store: Store;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'grove-store-'));
  handle = openSqlite({ file: join(dir, 'grove.db') });
  store = new Store(handle.db);
  store.ensureProject({ name: 'p', source: '/src', defaultBranch: 'main', createdAt: new Date().toISOString() });
});
afterEach(() => {
  void handle.close();
  rmSync(dir, { recursive: true, force: true });
});

const values = (name: string) => ({ slug: `p~${name}`, project: 'p', name, isDefault: false, branch: `grove/${name}`, baseRef: 'main' });
const reserve = (name: string, cap: number, queue = false) => store.reserveNew(values(name), cap, { queue });
const line = () => [...store.queuePositions()].map(([id, pos]) => [store.byId(id)?.name, pos]);

describe('Store: the line', () => {
  it('queues only when no slot is free, at the end of the line, and only with queue', () => {
    expect(reserve('a', 1, true)).toMatchObject({ position: null, row: { state: 'creating', queueSeq: null } });
    expect(() => reserve('b', 1)).toThrow(expect.objectContaining({ code: 'capacity_reached' }) as Error);
    expect(reserve('b', 1, true)).toMatchObject({ position: 1, row: { state: 'queued' }, capacity: { running: 0, creating: 1, cap: 1, queued: 1 } });
    expect(reserve('c', 1, true)).toMatchObject({ position: 2 });
    // A queued row holds its slug.
    expect(() => reserve('c', 1, true)).toThrow(expect.objectContaining({ code: 'workspace_exists' }) as Error);
    expect(line()).toEqual([
      ['b', 1],
      ['c', 2],
    ]);
  });

  it('promotes first in line first, never past the cap', () => {
    const a = reserve('a', 1).row;
    reserve('b', 1, true);
    reserve('c', 1, true);
    expect(store.promoteNext(1)).toBeUndefined(); // a still holds the slot
    store.update(a.id, { state: 'stopped' });
    const first = store.promoteNext(1);
    expect(first).toMatchObject({ row: { name: 'b', state: 'creating', queueSeq: null }, capacity: { creating: 1, queued: 1 } });
    expect(store.promoteNext(1)).toBeUndefined();
    expect(line()).toEqual([['c', 1]]);
    // With room for more than the line holds, each waiting row is promoted once.
    expect(store.promoteNext(3)?.row.name).toBe('c');
    expect(store.promoteNext(3)).toBeUndefined();
  });

  it('a slot is not free while others wait: no fork or reopen jumps the line', () => {
    const a = reserve('a', 2).row;
    store.update(a.id, { state: 'running' });
    const b = reserve('b', 2).row;
    store.update(b.id, { state: 'running' });
    reserve('c', 2, true);
    store.update(b.id, { state: 'stopped' });
    const c = store.capacity(2);
    expect(c).toEqual({ running: 1, creating: 0, cap: 2, queued: 1 });
    expect(slotFree(c)).toBe(false);
    expect(() => reserve('d', 2)).toThrow(expect.objectContaining({ code: 'capacity_reached', details: expect.objectContaining({ queued: 1 }) }) as Error);
    expect(() => store.reserveStart(b.id, 2)).toThrow(expect.objectContaining({ code: 'capacity_reached' }) as Error);
    expect(capacityError(c).message).toContain('1 workspace waits in line');
  });

  it('keeps the order when one leaves, and continues numbering after the last in line', () => {
    reserve('a', 1);
    const b = reserve('b', 1, true).row;
    reserve('c', 1, true);
    store.update(b.id, { state: 'gone', queueSeq: null }, 'queued');
    expect(line()).toEqual([['c', 1]]);
    expect(reserve('d', 1, true).position).toBe(2);
    expect(toWorkspace(store.live('p~d') ?? b, 2).queuePosition).toBe(2);
    expect(toWorkspace(store.live('p~a') ?? b, 2).queuePosition).toBeNull();
  });
});
