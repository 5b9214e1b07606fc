// The thread as the browser sees it: persisted lines merged by seq, the streaming draft, and messages still in flight.
import { GROVE_LINE_PROVIDER, groveThreadEventSchema } from '@grove/contracts';
import type { StreamFrame, ThreadLine } from '@grove/contracts';

/** A message this tab sent whose user line has not arrived yet. */
export interface PendingMessage {
  id: number;
  text: string;
  /** Known once POST /messages answered; the pending entry goes away when the line with this seq arrives. */
  seq: number | null;
}

export interface ThreadState {
  /** Sorted by seq, one entry per seq (history and live frames overlap; both are merged, never duplicated). */
  lines: ThreadLine[];
  /** Assistant text streamed for a turn but not yet persisted as a line. */
  draft: { turn: string; text: string } | null;
  /** A turn is running: the composer waits. */
  busy: boolean;
  pending: PendingMessage[];
  /** The history has been loaded at least once. */
  loaded: boolean;
  /** The backend's stream has said hello at least once, so `busy` is its word, not a guess. */
  heard: boolean;
}

export type ThreadAction =
  | { type: 'history'; lines: ThreadLine[] }
  | { type: 'frame'; frame: StreamFrame }
  | { type: 'sending'; id: number; text: string }
  | { type: 'sent'; id: number; seq: number }
  | { type: 'send_failed'; id: number; busy: boolean };

export const initialThreadState: ThreadState = { lines: [], draft: null, busy: false, pending: [], loaded: false, heard: false };

export function lastSeq(state: ThreadState): number {
  return state.lines.at(-1)?.seq ?? -1;
}

function merge(lines: ThreadLine[], incoming: ThreadLine[]): ThreadLine[] {
  if (incoming.length === 0) return lines;
  const last = lines.at(-1);
  // The common live case: one new line after everything we have.
  if (incoming.length === 1 && incoming[0] && (!last || incoming[0].seq > last.seq)) return [...lines, incoming[0]];
  const bySeq = new Map<number, ThreadLine>();
  for (const l of lines) bySeq.set(l.seq, l);
  for (const l of incoming) bySeq.set(l.seq, l);
  return [...bySeq.values()].sort((a, b) => a.seq - b.seq);
}

/** Drop pending messages whose user line is now in the thread. */
function settle(pending: PendingMessage[], lines: ThreadLine[]): PendingMessage[] {
  if (pending.length === 0) return pending;
  const seen = new Set(lines.filter((l) => l.kind === 'user').map((l) => l.seq));
  const left = pending.filter((p) => p.seq === null || !seen.has(p.seq));
  return left.length === pending.length ? pending : left;
}

function isUndoMarker(line: ThreadLine): boolean {
  return line.kind === 'raw' && line.provider === GROVE_LINE_PROVIDER && (line.event as { type?: unknown } | null)?.type === 'undo';
}

function applyFrame(state: ThreadState, frame: StreamFrame): ThreadState {
  switch (frame.type) {
    case 'hello':
      // The backend knows whether a turn runs; trust it over whatever we guessed while disconnected.
      return { ...state, busy: frame.busy, draft: frame.busy ? state.draft : null, heard: true };
    case 'delta': {
      const text = state.draft?.turn === frame.turn ? state.draft.text + frame.text : frame.text;
      return { ...state, busy: true, draft: { turn: frame.turn, text } };
    }
    case 'line': {
      const { line } = frame;
      const lines = merge(state.lines, [line]);
      const pending = settle(state.pending, lines);
      const sameTurn = state.draft?.turn === line.turn;
      if (line.kind === 'turn_end') return { ...state, lines, pending, busy: false, draft: sameTurn ? null : state.draft };
      // The persisted reply replaces the streamed text it was built from.
      if (line.kind === 'assistant') return { ...state, lines, pending, busy: true, draft: sameTurn ? null : state.draft };
      // The undo marker is written between turns (the host holds the agent meanwhile): it starts nothing.
      if (isUndoMarker(line)) return { ...state, lines, pending };
      // A user line (ours or another tab's) starts a turn; any other line belongs to a running one.
      return { ...state, lines, pending, busy: true };
    }
  }
}

export function threadReducer(state: ThreadState, action: ThreadAction): ThreadState {
  switch (action.type) {
    case 'history': {
      const lines = merge(state.lines, action.lines);
      return { ...state, lines, pending: settle(state.pending, lines), loaded: true };
    }
    case 'frame':
      return applyFrame(state, action.frame);
    case 'sending':
      return { ...state, pending: [...state.pending, { id: action.id, text: action.text, seq: null }] };
    case 'sent': {
      const pending = state.pending.map((p) => (p.id === action.id ? { ...p, seq: action.seq } : p));
      return { ...state, busy: true, pending: settle(pending, state.lines) };
    }
    case 'send_failed':
      return { ...state, busy: state.busy || action.busy, pending: state.pending.filter((p) => p.id !== action.id) };
  }
}

/** What the thread view renders: tool calls are paired with their results; turn ends only when they say something. */
export type ThreadItem =
  | { kind: 'user'; key: string; text: string; at: string | null; pending: boolean }
  | { kind: 'assistant'; key: string; text: string; at: string | null; streaming: boolean }
  | { kind: 'tool'; key: string; tool: string; input: unknown; result: { output: string; isError: boolean } | null }
  | { kind: 'error'; key: string; message: string }
  | { kind: 'turn_end'; key: string; status: 'failed' | 'cancelled' }
  | { kind: 'raw'; key: string; provider: string; event: unknown }
  /** What a turn did to the files: recorded changes (a snapshot) and changes put back (outside the allowed paths). */
  | { kind: 'changes'; key: string; turn: string; files: string[]; reverted: Array<{ path: string; action: 'restored' | 'removed' }>; allowedPaths: string[] }
  | { kind: 'undo'; key: string; undoneTurn: string; files: string[] }
  | { kind: 'note'; key: string; text: string };

/**
 * Grove's own lines (after-turn checks, undo) become items of their own; one changes item per turn
 * ('merged': this line went into the turn's item already shown). Null: not a line Grove knows.
 */
function groveItem(line: Extract<ThreadLine, { kind: 'raw' }>, key: string, changes: Map<string, Extract<ThreadItem, { kind: 'changes' }>>): ThreadItem | 'merged' | null {
  const parsed = groveThreadEventSchema.safeParse(line.event);
  if (line.provider !== GROVE_LINE_PROVIDER || !parsed.success) return null;
  const e = parsed.data;
  if (e.type === 'undo') return { kind: 'undo', key, undoneTurn: e.undoneTurn, files: e.files };
  if (e.type === 'host_unavailable') return { kind: 'note', key, text: 'The files could not be checked after this reply; its changes stay as they are.' };
  const seen = changes.get(line.turn);
  const item = seen ?? { kind: 'changes' as const, key, turn: line.turn, files: [], reverted: [], allowedPaths: [] };
  if (e.type === 'snapshot') item.files = e.files;
  else {
    item.reverted = [...item.reverted, ...e.paths];
    item.allowedPaths = e.allowedPaths;
  }
  changes.set(line.turn, item);
  return seen ? 'merged' : item;
}

export function toItems(state: ThreadState): ThreadItem[] {
  const items: ThreadItem[] = [];
  const tools = new Map<string, Extract<ThreadItem, { kind: 'tool' }>>();
  const changes = new Map<string, Extract<ThreadItem, { kind: 'changes' }>>();
  for (const line of state.lines) {
    const key = `l${line.seq}`;
    switch (line.kind) {
      case 'user':
      case 'assistant':
        if (line.kind === 'user') items.push({ kind: 'user', key, text: line.text, at: line.at, pending: false });
        else items.push({ kind: 'assistant', key, text: line.text, at: line.at, streaming: false });
        break;
      case 'tool_call': {
        const item = { kind: 'tool' as const, key, tool: line.tool, input: line.input, result: null };
        tools.set(`${line.turn}/${line.callId}`, item);
        items.push(item);
        break;
      }
      case 'tool_result': {
        const call = tools.get(`${line.turn}/${line.callId}`);
        const result = { output: line.output, isError: line.isError };
        if (call) call.result = result;
        else items.push({ kind: 'tool', key, tool: 'tool', input: undefined, result });
        break;
      }
      case 'error':
        items.push({ kind: 'error', key, message: line.message });
        break;
      case 'turn_end':
        if (line.status !== 'completed') items.push({ kind: 'turn_end', key, status: line.status });
        break;
      case 'raw': {
        const grove = groveItem(line, key, changes);
        if (grove === null) items.push({ kind: 'raw', key, provider: line.provider, event: line.event });
        else if (grove !== 'merged') items.push(grove);
        break;
      }
    }
  }
  for (const p of state.pending) items.push({ kind: 'user', key: `p${p.id}`, text: p.text, at: null, pending: true });
  if (state.draft) items.push({ kind: 'assistant', key: `d${state.draft.turn}`, text: state.draft.text, at: null, streaming: true });
  return items;
}
