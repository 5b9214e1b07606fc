// A local stand-in for the Anthropic Messages API, for running the real Claude Code CLI in tests:
// plain HTTP on 127.0.0.1, POST /v1/messages with stream: true answered as server-sent events
// (message_start, content_block_start/delta/stop for text and tool_use, message_delta, message_stop).
// What the "model" does is decided by the latest user text in the conversation:
//   "write <path> <content>"    a Write tool call for /workspace/<path> (several: "write a x; write b y")
//   "slow"                      text deltas every 100 ms until the client goes away
//   anything else               a short text reply, streamed in three deltas
// After a tool result it answers with a closing text. Every request is recorded (headers and body).
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server, ServerResponse } from 'node:http';

export interface RecordedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: MessagesBody | null;
}

interface ContentBlock {
  type: string;
  text?: string;
  tool_use_id?: string;
}
interface MessagesBody {
  model?: string;
  stream?: boolean;
  tools?: Array<{ name: string }>;
  messages?: Array<{ role: string; content: string | ContentBlock[] }>;
}

export interface FakeAnthropic {
  url: string;
  requests: RecordedRequest[];
  /** Resolves when a streamed response was cut by the client (a cancelled turn). */
  clientGone(): Promise<void>;
  close(): Promise<void>;
}

export const FAKE_REPLY = 'Hello from the fake model.';

function userTexts(body: MessagesBody): string[] {
  const texts: string[] = [];
  for (const m of body.messages ?? []) {
    if (m.role !== 'user') continue;
    if (typeof m.content === 'string') texts.push(m.content);
    else for (const b of m.content) if (b.type === 'text' && b.text && !b.text.startsWith('<system-reminder>')) texts.push(b.text);
  }
  return texts;
}

function lastIsToolResult(body: MessagesBody): boolean {
  const last = body.messages?.at(-1);
  return Array.isArray(last?.content) && last.content.some((b) => b.type === 'tool_result');
}

export async function startFakeAnthropic(): Promise<FakeAnthropic> {
  const requests: RecordedRequest[] = [];
  const goneWaiters: Array<() => void> = [];
  let n = 0;

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      let body: MessagesBody | null = null;
      try {
        body = text ? (JSON.parse(text) as MessagesBody) : null;
      } catch {
        body = null;
      }
      requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      n++;
      if (!req.url?.startsWith('/v1/messages')) {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: 'no such route' } }));
        return;
      }
      if (req.url.startsWith('/v1/messages/count_tokens')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ input_tokens: 42 }));
        return;
      }
      answer(res, body ?? {}, n, () => goneWaiters.splice(0).forEach((w) => w()));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    clientGone: () => new Promise((resolve) => goneWaiters.push(resolve)),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function answer(res: ServerResponse, body: MessagesBody, n: number, onGone: () => void): void {
  const usage = { input_tokens: 12, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
  const message = { id: `msg_fake_${n}`, type: 'message', role: 'assistant', model: body.model ?? 'fake', content: [], stop_reason: null, stop_sequence: null, usage };
  const prompt = userTexts(body).at(-1) ?? '';

  if (!body.stream) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ ...message, content: [{ type: 'text', text: FAKE_REPLY }], stop_reason: 'end_turn', usage: { ...usage, output_tokens: 5 } }));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const send = (type: string, data: Record<string, unknown>) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  const text = (index: number, parts: string[]) => {
    send('content_block_start', { index, content_block: { type: 'text', text: '' } });
    for (const part of parts) send('content_block_delta', { index, delta: { type: 'text_delta', text: part } });
    send('content_block_stop', { index });
  };
  const finish = (stop: 'end_turn' | 'tool_use') => {
    send('message_delta', { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 9 } });
    send('message_stop', {});
    res.end();
  };
  send('message_start', { message });

  if (lastIsToolResult(body)) {
    text(0, ['All ', 'done.']);
    finish('end_turn');
    return;
  }
  if (prompt.trim() === 'slow') {
    send('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
    let i = 0;
    const timer = setInterval(() => send('content_block_delta', { index: 0, delta: { type: 'text_delta', text: `tick ${i++} ` } }), 100);
    res.on('close', () => {
      clearInterval(timer);
      onGone();
    });
    return;
  }
  const writes = [...prompt.matchAll(/write (\S+) ([^;]*)/g)];
  if (writes.length > 0 && body.tools?.some((t) => t.name === 'Write')) {
    text(0, ['Writing ', 'now.']);
    writes.forEach((w, i) => {
      const input = JSON.stringify({ file_path: `/workspace/${w[1] ?? 'x'}`, content: (w[2] ?? '').trim() });
      send('content_block_start', { index: i + 1, content_block: { type: 'tool_use', id: `toolu_fake_${n}_${i}`, name: 'Write', input: {} } });
      // The input arrives in pieces, as the real API sends it.
      send('content_block_delta', { index: i + 1, delta: { type: 'input_json_delta', partial_json: input.slice(0, 7) } });
      send('content_block_delta', { index: i + 1, delta: { type: 'input_json_delta', partial_json: input.slice(7) } });
      send('content_block_stop', { index: i + 1 });
    });
    finish('tool_use');
    return;
  }
  text(0, ['Hello ', 'from the ', 'fake model.']);
  finish('end_turn');
}
