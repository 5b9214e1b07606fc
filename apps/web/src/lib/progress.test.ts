// Fork progress from events, and the capacity sentence.
import { describe, expect, it } from 'vitest';
import type { GroveEvent, Workspace } from '@grove/contracts';
import { forkProgress, lifecycleProgress, operationOf } from './progress.ts';
import { capacityReason, isFull } from './capacity.ts';

let id = 0;
const ev = (type: string, data: Record<string, unknown> = {}): GroveEvent => ({ id: ++id, slug: 'demo~a', type, data, at: '2026-01-01T00:00:00Z' });

describe('forkProgress', () => {
  it('counts the phases reached in order', () => {
    expect(forkProgress([ev('workspace.reserved'), ev('workspace.prepared')])).toEqual({ reached: 2, failed: null, done: false });
    const all = [ev('workspace.reserved'), ev('workspace.prepared'), ev('sandbox.started'), ev('workspace.registered')];
    expect(forkProgress(all).done).toBe(true);
  });

  it('reports spawn_failed with its reason', () => {
    const p = forkProgress([ev('workspace.reserved'), ev('workspace.prepared'), ev('spawn_failed', { reason: 'image missing' })]);
    expect(p).toEqual({ reached: 2, failed: 'image missing', done: false });
  });

  it('ignores an earlier attempt under the same slug', () => {
    const old = [ev('workspace.reserved'), ev('workspace.prepared'), ev('sandbox.started'), ev('workspace.registered'), ev('workspace.cleaned')];
    expect(forkProgress([...old, ev('workspace.reserved')])).toEqual({ reached: 1, failed: null, done: false });
  });
});

describe('lifecycleProgress', () => {
  const fork = [ev('workspace.reserved', { op: 'fork' }), ev('workspace.prepared'), ev('sandbox.started'), ev('workspace.registered')];

  it('follows a reopen with its own phases, after an earlier fork and stop', () => {
    const events = [...fork, ev('workspace.stopped'), ev('workspace.reserved', { op: 'start' }), ev('sandbox.started')];
    expect(operationOf(events)).toBe('start');
    const p = lifecycleProgress(events);
    expect(p.phases.map((x) => x.type)).toEqual(['workspace.reserved', 'sandbox.started', 'workspace.started']);
    expect(p).toMatchObject({ op: 'start', reached: 2, done: false, failed: null });
    expect(lifecycleProgress([...events, ev('workspace.started')]).done).toBe(true);
  });

  it('shows nothing reached when asked for a start whose events have not come yet', () => {
    expect(lifecycleProgress([], 'start')).toMatchObject({ op: 'start', reached: 0, done: false });
    expect(lifecycleProgress(fork)).toMatchObject({ op: 'fork', reached: 4, done: true });
  });

  it('reports a failed reopen with its reason', () => {
    const p = lifecycleProgress([ev('workspace.reserved', { op: 'start' }), ev('spawn_failed', { op: 'start', reason: 'health check timed out' })]);
    expect(p).toMatchObject({ op: 'start', reached: 1, failed: 'health check timed out' });
  });

  it("carries this fork's fallback from a pull request to the default branch, not an earlier attempt's", () => {
    const fallback = ev('workspace.base_fallback', { wanted: 'pull request #7', base: 'main', reason: 'no such pull request' });
    const p = lifecycleProgress([ev('workspace.reserved', { op: 'fork' }), fallback, ev('workspace.prepared')]);
    expect(p).toMatchObject({ reached: 2, baseFallback: { wanted: 'pull request #7', base: 'main', reason: 'no such pull request' } });
    expect(lifecycleProgress([...fork.slice(0, 1), fallback, ...fork.slice(1), ev('workspace.cleaned'), ev('workspace.reserved', { op: 'fork' })]).baseFallback).toBeNull();
    expect(lifecycleProgress(fork).baseFallback).toBeNull();
  });
});

describe('capacity', () => {
  const w = (name: string, state: Workspace['state'], isDefault = false) => ({ name, state, isDefault, project: 'demo' }) as Workspace;
  it('is full when running plus creating reaches the cap', () => {
    expect(isFull({ running: 1, creating: 1, cap: 2, queued: 0 })).toBe(true);
    expect(isFull({ running: 1, creating: 0, cap: 2, queued: 0 })).toBe(false);
    expect(isFull({ running: 1, creating: 0, cap: 2, queued: 1 })).toBe(true);
  });
  it('names the way out', () => {
    const text = capacityReason({ running: 2, creating: 0, cap: 2 }, [w('default', 'running', true), w('a', 'running'), w('b', 'stopped')]);
    expect(text).toBe('All 2 sandboxes are in use (2 running). Stop or tear down one of: demo (default), a.');
  });
});
