// The thread reducer: history and live frames merge by seq, deltas become the final line, busy follows the turn.
import { describe, expect, it } from 'vitest';
import type { ThreadLine } from '@grove/contracts';
import { initialThreadState, threadReducer, toItems, type ThreadAction, type ThreadState } from './thread-state.ts';

const at = '2026-01-01T00:00:00.000Z';
const user = (seq: number, text: string, turn = `t${seq}`): ThreadLine => ({ seq, turn, at, kind: 'user', text });
const assistant = (seq: number, text: string, turn: string): ThreadLine => ({ seq, turn, at, kind: 'assistant', text });
const end = (seq: number, turn: string, status: 'completed' | 'failed' | 'cancelled' = 'completed'): ThreadLine => ({ seq, turn, at, kind: 'turn_end', status });
const run = (...actions: ThreadAction[]): ThreadState => actions.reduce(threadReducer, initialThreadState);
const line = (l: ThreadLine): ThreadAction => ({ type: 'frame', frame: { type: 'line', line: l } });

describe('threadReducer', () => {
  it('merges overlapping history and live lines by seq, in order, without duplicates', () => {
    const s = run(line(user(2, 'b')), { type: 'history', lines: [user(0, 'a'), assistant(1, 'x', 't0'), user(2, 'b')] }, line(assistant(3, 'y', 't2')));
    expect(s.lines.map((l) => l.seq)).toEqual([0, 1, 2, 3]);
    expect(s.loaded).toBe(true);
  });

  it('appends deltas of a turn and replaces them with the persisted assistant line', () => {
    let s = run(line(user(0, 'hi', 't1')), { type: 'frame', frame: { type: 'delta', turn: 't1', text: 'Hel' } }, { type: 'frame', frame: { type: 'delta', turn: 't1', text: 'lo' } });
    expect(s.draft).toEqual({ turn: 't1', text: 'Hello' });
    expect(s.busy).toBe(true);
    s = threadReducer(s, line(assistant(1, 'Hello', 't1')));
    expect(s.draft).toBeNull();
    expect(toItems(s).filter((i) => i.kind === 'assistant')).toHaveLength(1);
    s = threadReducer(s, line(end(2, 't1')));
    expect(s.busy).toBe(false);
  });

  it('drops a pending message once its user line arrives, whichever comes first', () => {
    const lineFirst = run({ type: 'sending', id: 1, text: 'hi' }, line(user(5, 'hi')), { type: 'sent', id: 1, seq: 5 });
    expect(lineFirst.pending).toEqual([]);
    const answerFirst = run({ type: 'sending', id: 1, text: 'hi' }, { type: 'sent', id: 1, seq: 5 });
    expect(answerFirst.pending).toHaveLength(1);
    expect(threadReducer(answerFirst, line(user(5, 'hi'))).pending).toEqual([]);
  });

  it('a refused send removes the pending message and marks the thread busy on 409', () => {
    const s = run({ type: 'sending', id: 1, text: 'hi' }, { type: 'send_failed', id: 1, busy: true });
    expect(s.pending).toEqual([]);
    expect(s.busy).toBe(true);
  });

  it('hello resets busy to what the backend says', () => {
    const s = run({ type: 'frame', frame: { type: 'delta', turn: 't', text: 'x' } }, { type: 'frame', frame: { type: 'hello', lastSeq: 3, busy: false } });
    expect(s.busy).toBe(false);
    expect(s.draft).toBeNull();
  });

  it('is heard only once the backend said hello: a history alone does not say whether a turn runs', () => {
    expect(run({ type: 'history', lines: [] }).heard).toBe(false);
    expect(run({ type: 'history', lines: [] }, { type: 'frame', frame: { type: 'hello', lastSeq: 0, busy: true } }).heard).toBe(true);
  });
});

describe('toItems', () => {
  it('pairs tool calls with their results and shows only unusual turn ends', () => {
    const s = run({
      type: 'history',
      lines: [
        user(0, 'write a', 't'),
        { seq: 1, turn: 't', at, kind: 'tool_call', callId: 'c1', tool: 'write_file', input: { path: 'a' } },
        { seq: 2, turn: 't', at, kind: 'tool_result', callId: 'c1', output: 'wrote', isError: false },
        { seq: 3, turn: 't', at, kind: 'error', message: 'boom' },
        end(4, 't', 'failed'),
        end(5, 'u', 'completed'),
      ],
    });
    const items = toItems(s);
    expect(items.map((i) => i.kind)).toEqual(['user', 'tool', 'error', 'turn_end']);
    expect(items[1]).toMatchObject({ tool: 'write_file', result: { output: 'wrote', isError: false } });
  });
});

describe("Grove's own lines", () => {
  const raw = (seq: number, turn: string, event: unknown, provider = 'grove'): ThreadLine => ({ seq, turn, at, kind: 'raw', provider, event });
  it('become one changes item per turn (put back and recorded files together), an undo marker, and a note', () => {
    const s = run({
      type: 'history',
      lines: [
        user(0, 'write a.txt x', 'turn-1'),
        raw(1, 'turn-1', { type: 'paths_reverted', allowedPaths: ['*.txt'], paths: [{ path: 'secret.md', action: 'removed' }] }),
        raw(2, 'turn-1', { type: 'snapshot', ref: 'refs/grove/demo/turns/1', commit: 'c1', files: ['a.txt'] }),
        end(3, 'turn-1'),
        raw(4, 'turn-1', { type: 'undo', undoneTurn: 'turn-1', ref: 'refs/grove/demo/undone/1', restored: 'c0', files: ['a.txt'] }),
        raw(5, 'turn-2', { type: 'host_unavailable', message: 'no answer' }),
        raw(6, 'turn-2', { type: 'something_new' }),
        raw(7, 'turn-2', { type: 'snapshot' }, 'claude'),
      ],
    });
    const items = toItems(s);
    expect(items.map((i) => i.kind)).toEqual(['user', 'changes', 'undo', 'note', 'raw', 'raw']);
    expect(items[1]).toMatchObject({ turn: 'turn-1', files: ['a.txt'], reverted: [{ path: 'secret.md', action: 'removed' }], allowedPaths: ['*.txt'] });
    expect(items[2]).toMatchObject({ undoneTurn: 'turn-1', files: ['a.txt'] });
  });

  it('an undo marker arriving live between turns does not make the thread look busy', () => {
    let s = run(line(user(0, 'hi', 'turn-1')), line(end(1, 'turn-1')));
    expect(s.busy).toBe(false);
    s = threadReducer(s, line(raw(2, 'turn-1', { type: 'undo', undoneTurn: 'turn-1', ref: 'refs/grove/demo/undone/1', restored: 'c0', files: ['a.txt'] })));
    expect(s.busy).toBe(false);
    expect(toItems(s).at(-1)?.kind).toBe('undo');
  });
});
