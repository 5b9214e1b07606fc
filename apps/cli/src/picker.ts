// The interactive `grove resume` picker: key decoding and the selection logic are pure (tested in
// picker.test.ts); runPicker owns the terminal and always gives it back as it found it.
export type Key = 'up' | 'down' | 'home' | 'end' | 'enter' | 'cancel' | 'backspace' | { digit: number } | 'other';

/** Split one chunk of raw terminal input into keys (a chunk may hold several, e.g. "2\r" typed fast). */
export function decodeKeys(chunk: string): Key[] {
  const keys: Key[] = [];
  for (let i = 0; i < chunk.length; ) {
    const rest = chunk.slice(i);
    // CSI / SS3 sequences: ESC [ or ESC O, optional parameters, a final letter or ~.
    const seq = rest.startsWith('\x1b[') || rest.startsWith('\x1bO') ? /^..([0-9;]*)([A-Za-z~])/.exec(rest) : null;
    if (seq) {
      const [all, num, fin] = seq;
      if (fin === 'A') keys.push('up');
      else if (fin === 'B') keys.push('down');
      else if (fin === 'H' || (fin === '~' && (num === '1' || num === '7'))) keys.push('home');
      else if (fin === 'F' || (fin === '~' && (num === '4' || num === '8'))) keys.push('end');
      else keys.push('other');
      i += all.length;
      continue;
    }
    const c = chunk[i] ?? '';
    i += 1;
    if (c === '\x1b' || c === '\x03' || c === 'q' || c === '\x04') keys.push('cancel');
    else if (c === '\r' || c === '\n') keys.push('enter');
    else if (c === 'k') keys.push('up');
    else if (c === 'j') keys.push('down');
    else if (c === 'g') keys.push('home');
    else if (c === 'G') keys.push('end');
    else if (c === '\x7f' || c === '\b') keys.push('backspace');
    else if (c >= '0' && c <= '9') keys.push({ digit: Number(c) });
    else keys.push('other');
  }
  return keys;
}

export interface PickerState {
  /** Highlighted row, 0-based. */
  index: number;
  count: number;
  /** Digits typed so far ("1", "12"): the row number Enter would choose. */
  typed: string;
}

export type PickerResult = { state: PickerState; done?: { chosen: number } | { cancelled: true } };

export function initialState(count: number): PickerState {
  return { index: 0, count, typed: '' };
}

/** One key: move (arrows, j/k, g/G wrap at the ends), type a row number, choose with Enter, cancel with Esc/q/Ctrl-C. */
export function step(s: PickerState, key: Key): PickerResult {
  if (key === 'cancel') return { state: s, done: { cancelled: true } };
  if (s.count === 0) return { state: s };
  if (key === 'enter') return { state: { ...s, typed: '' }, done: { chosen: s.index } };
  if (key === 'up') return { state: { ...s, typed: '', index: (s.index - 1 + s.count) % s.count } };
  if (key === 'down') return { state: { ...s, typed: '', index: (s.index + 1) % s.count } };
  if (key === 'home') return { state: { ...s, typed: '', index: 0 } };
  if (key === 'end') return { state: { ...s, typed: '', index: s.count - 1 } };
  if (key === 'backspace') {
    const typed = s.typed.slice(0, -1);
    return { state: { ...s, typed, index: typed ? Number(typed) - 1 : s.index } };
  }
  if (typeof key === 'object') {
    // Another digit extends the number while it still names a row; otherwise it starts a new one.
    const longer = `${s.typed}${key.digit}`;
    const typed = Number(longer) >= 1 && Number(longer) <= s.count ? longer : key.digit >= 1 && key.digit <= s.count ? String(key.digit) : '';
    return { state: { ...s, typed, index: typed ? Number(typed) - 1 : s.index } };
  }
  return { state: s };
}

/**
 * The picker's lines: a title, the rows (the highlighted one marked), a help line; each cut to `width`,
 * and at most `height` lines in all (a window of rows around the highlighted one), so nothing wraps or
 * scrolls and the next draw can move back over exactly these lines.
 */
export function renderPicker(title: string, rows: readonly string[], s: PickerState, width: number, height = Number.POSITIVE_INFINITY): string[] {
  const cut = (l: string) => (l.length > width ? `${l.slice(0, Math.max(0, width - 1))}…` : l);
  const visible = Math.max(1, Math.min(rows.length, height - 2));
  const start = Math.min(Math.max(0, s.index - Math.floor(visible / 2)), Math.max(0, rows.length - visible));
  const lines = [title];
  for (let i = start; i < start + visible && i < rows.length; i++) {
    lines.push(`${i === s.index ? '›' : ' '} ${String(i + 1).padStart(String(rows.length).length)}  ${rows[i] ?? ''}`);
  }
  const where = visible < rows.length ? ` · ${s.index + 1}/${rows.length}` : '';
  lines.push(`↑/↓ or j/k move · number + Enter choose · Esc/q cancel${s.typed ? ` · #${s.typed}` : ''}${where}`);
  return lines.map(cut);
}

export interface PickerIo {
  input: NodeJS.ReadStream;
  output: NodeJS.WriteStream;
}

const HIDE_CURSOR = '\x1b[?25l';
const SHOW_CURSOR = '\x1b[?25h';

/**
 * Draw the picker and read keys in raw mode until a choice or a cancel. Resolves with the chosen row
 * index or null. The terminal (raw mode, cursor, the drawn lines) is restored on every way out.
 */
export function runPicker(title: string, rows: readonly string[], io: PickerIo): Promise<number | null> {
  const { input, output } = io;
  let state = initialState(rows.length);
  let drawn = 0;
  const draw = () => {
    const lines = renderPicker(title, rows, state, Math.max(20, (output.columns || 80) - 1), Math.max(3, output.rows || 24));
    // Back to the first line drawn last time, clear below, draw again: lines never wrap (cut to width).
    output.write(`${drawn ? `\x1b[${drawn}A\r` : ''}\x1b[J${lines.join('\n')}\n`);
    drawn = lines.length;
  };
  const wasRaw = input.isRaw;
  return new Promise((resolve) => {
    const restore = () => {
      input.off('data', onData);
      process.off('exit', restore);
      if (input.isTTY) input.setRawMode(wasRaw);
      input.pause();
      // Leave the screen as it was before the picker: its lines erased, the cursor visible.
      output.write(`${drawn ? `\x1b[${drawn}A\r` : ''}\x1b[J${SHOW_CURSOR}`);
      drawn = 0;
    };
    const finish = (v: number | null) => {
      restore();
      resolve(v);
    };
    function onData(chunk: Buffer | string) {
      for (const key of decodeKeys(chunk.toString())) {
        const r = step(state, key);
        state = r.state;
        if (r.done) return finish('chosen' in r.done ? r.done.chosen : null);
      }
      draw();
    }
    // Even an exit from elsewhere (an uncaught error) must not leave the terminal raw with no cursor.
    process.on('exit', restore);
    if (input.isTTY) input.setRawMode(true);
    input.setEncoding('utf8');
    input.on('data', onData);
    input.resume();
    output.write(HIDE_CURSOR);
    draw();
  });
}
