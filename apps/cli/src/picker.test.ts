// The resume picker's keys and selection, without a terminal.
import { describe, expect, it } from 'vitest';
import { decodeKeys, initialState, renderPicker, step, type Key, type PickerState } from './picker.ts';

function press(s: PickerState, input: string) {
  let state = s;
  for (const key of decodeKeys(input)) {
    const r = step(state, key);
    state = r.state;
    if (r.done) return { state, done: r.done };
  }
  return { state, done: undefined };
}

describe('decodeKeys', () => {
  it('reads arrows (CSI and SS3), vi keys, digits, Enter, Esc, Ctrl-C and q, several per chunk', () => {
    expect(decodeKeys('\x1b[A\x1b[B\x1bOA\x1bOB')).toEqual(['up', 'down', 'up', 'down']);
    expect(decodeKeys('kj')).toEqual(['up', 'down']);
    expect(decodeKeys('12\r')).toEqual<Key[]>([{ digit: 1 }, { digit: 2 }, 'enter']);
    expect(decodeKeys('\n')).toEqual(['enter']);
    expect(decodeKeys('\x1b')).toEqual(['cancel']);
    expect(decodeKeys('\x03')).toEqual(['cancel']);
    expect(decodeKeys('q')).toEqual(['cancel']);
    expect(decodeKeys('\x1b[H\x1b[F\x1b[1~\x1b[4~gG')).toEqual(['home', 'end', 'home', 'end', 'home', 'end']);
    expect(decodeKeys('\x1b[C x\x7f')).toEqual(['other', 'other', 'other', 'backspace']);
  });
});

describe('step', () => {
  it('moves with wrap-around and chooses the highlighted row with Enter', () => {
    expect(press(initialState(3), 'j\r').done).toEqual({ chosen: 1 });
    expect(press(initialState(3), '\x1b[B\x1b[B\x1b[B\r').done).toEqual({ chosen: 0 });
    expect(press(initialState(3), 'k\r').done).toEqual({ chosen: 2 });
    expect(press(initialState(3), 'G').state.index).toBe(2);
    expect(press(initialState(3), 'Gg').state.index).toBe(0);
  });

  it('chooses by number: digits extend while they name a row, otherwise start over', () => {
    expect(press(initialState(3), '2\r').done).toEqual({ chosen: 1 });
    expect(press(initialState(12), '12\r').done).toEqual({ chosen: 11 });
    // 3 then 4 is not row 34 of 12: 4 starts a new number.
    expect(press(initialState(12), '34\r').done).toEqual({ chosen: 3 });
    expect(press(initialState(3), '9').state).toEqual({ index: 0, count: 3, typed: '' });
    expect(press(initialState(12), '12\x7f').state).toEqual({ index: 0, count: 12, typed: '1' });
    expect(press(initialState(12), '2j').state).toEqual({ index: 2, count: 12, typed: '' });
  });

  it('cancels with Esc, q and Ctrl-C, also with nothing to choose; Enter on an empty list does nothing', () => {
    for (const k of ['\x1b', 'q', '\x03']) expect(press(initialState(3), `j${k}\r`).done).toEqual({ cancelled: true });
    expect(press(initialState(0), '\r').done).toBeUndefined();
    expect(press(initialState(0), 'q').done).toEqual({ cancelled: true });
  });
});

describe('renderPicker', () => {
  it('marks the highlighted row, numbers rows, shows the typed number and cuts lines to the width', () => {
    const s = press(initialState(2), '2').state;
    const lines = renderPicker('Pick:', ['demo~a  running', 'demo~b  stopped  agent: a long reply that goes on'], s, 30);
    expect(lines[0]).toBe('Pick:');
    expect(lines[1]).toBe('  1  demo~a  running');
    expect(lines[2]).toBe('› 2  demo~b  stopped  agent: …');
    expect(lines[3]?.length).toBe(30);
    expect(renderPicker('t', ['x'], s, 200).at(-1)).toContain('#2');
    expect(lines.every((l) => l.length <= 30)).toBe(true);
  });

  it('shows a window of rows around the highlighted one when the terminal is short', () => {
    const rows = Array.from({ length: 10 }, (_, i) => `row-${i + 1}`);
    const top = renderPicker('t', rows, initialState(10), 80, 5);
    expect(top).toHaveLength(5);
    expect(top.slice(1, 4)).toEqual(['›  1  row-1', '   2  row-2', '   3  row-3']);
    expect(top[4]).toContain('1/10');
    const mid = renderPicker('t', rows, press(initialState(10), '6').state, 80, 5);
    expect(mid.slice(1, 4)).toEqual(['   5  row-5', '›  6  row-6', '   7  row-7']);
    const end = renderPicker('t', rows, press(initialState(10), 'G').state, 80, 5);
    expect(end.slice(1, 4)).toEqual(['   8  row-8', '   9  row-9', '› 10  row-10']);
    expect(renderPicker('t', rows, initialState(10), 80)).toHaveLength(12);
  });
});
