#!/usr/bin/env node
/* eslint-disable no-restricted-properties -- a stand-in CLI for tests reads its own environment */
// A stand-in for `claude -p … --output-format stream-json` in the backend's unit tests: it prints
// the same event shapes the real CLI 2.1.x prints (checked against it), and does what the message
// says. The real binary is exercised in a real sandbox by packages/core's agent tests.
//   write <path> <content>   a Write tool call that really writes the file
//   slow                     streams text until SIGINT, then ends like the real CLI does when interrupted
//   stubborn                 ignores SIGINT (the provider must SIGKILL it)
//   crash                    exits 3 after the init event, with a message on stderr
//   error result             a result with is_error
//   odd                      a line that is not JSON, an event type nobody knows, a thinking block
//   anything else            a two-chunk text reply
// Sessions live in $FAKE_CLAUDE_STATE/<id>; --resume of an unknown id fails like the real CLI.
// Every invocation's argv and the env it got are appended to $FAKE_CLAUDE_LOG as JSON lines.
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';

const args = process.argv.slice(2);
const state = process.env.FAKE_CLAUDE_STATE;
const log = process.env.FAKE_CLAUDE_LOG;
if (log) {
  appendFileSync(log, `${JSON.stringify({ args, env: { ANTHROPIC_BASE_URL: process.env.ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY: process.env.ANTHROPIC_API_KEY, NO_PROXY: process.env.NO_PROXY, EXTRA: process.env.FAKE_EXTRA, GROVE_SLUG: process.env.GROVE_SLUG }, cwd: process.cwd() })}\n`);
}

const resumeAt = args.indexOf('--resume');
const resume = resumeAt >= 0 ? args[resumeAt + 1] : null;
const dash = args.indexOf('--');
const message = dash >= 0 ? args.slice(dash + 1).join(' ') : readFileSync(0, 'utf8');

const emit = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);
const result = (sessionId, extra = {}) =>
  emit({ type: 'result', subtype: 'success', is_error: false, num_turns: 1, result: 'done', session_id: sessionId, total_cost_usd: 0.0012, usage: { input_tokens: 10, output_tokens: 5 }, ...extra });

if (resume && !(state && existsSync(join(state, resume)))) {
  emit({ type: 'result', subtype: 'error_during_execution', is_error: true, num_turns: 0, session_id: resume, total_cost_usd: 0 });
  process.stderr.write(`No conversation found with session ID: ${resume}\n`);
  process.exit(1);
}
const sessionId = resume ?? randomUUID();
if (state) {
  mkdirSync(state, { recursive: true });
  appendFileSync(join(state, sessionId), `${message}\n`);
}
emit({ type: 'system', subtype: 'init', cwd: process.cwd(), session_id: sessionId, tools: ['Write'], model: 'fake', permissionMode: 'bypassPermissions' });

const delta = (text) => emit({ type: 'stream_event', event: { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } }, session_id: sessionId, parent_tool_use_id: null });
const assistant = (content) => emit({ type: 'assistant', message: { id: 'msg_1', role: 'assistant', content }, parent_tool_use_id: null, session_id: sessionId });

const words = message.trim().split(/\s+/);
if (words[0] === 'write') {
  const [, path, ...rest] = words;
  const content = rest.join(' ');
  delta('Writing ');
  delta('it.');
  assistant([{ type: 'text', text: 'Writing it.' }]);
  assistant([{ type: 'tool_use', id: 'toolu_1', name: 'Write', input: { file_path: join(process.cwd(), path), content } }]);
  writeFileSync(join(process.cwd(), path), content);
  emit({ type: 'user', message: { role: 'user', content: [{ tool_use_id: 'toolu_1', type: 'tool_result', content: `File created successfully at: ${path}` }] }, session_id: sessionId });
  assistant([{ type: 'text', text: 'Done.' }]);
  result(sessionId);
} else if (words[0] === 'slow' || words[0] === 'stubborn') {
  let i = 0;
  const timer = setInterval(() => delta(`tick ${i++} `), 20);
  process.on('SIGINT', () => {
    if (words[0] === 'stubborn') return;
    clearInterval(timer);
    assistant([{ type: 'text', text: 'tick tick' }]);
    emit({ type: 'user', message: { role: 'user', content: [{ type: 'text', text: '[Request interrupted by user]' }] }, session_id: sessionId });
    result(sessionId, { subtype: 'error_during_execution', is_error: true, result: undefined });
    process.exit(0);
  });
} else if (words[0] === 'crash') {
  process.stderr.write('fake claude: something broke\n');
  process.exit(3);
} else if (message.trim() === 'error result') {
  result(sessionId, { subtype: 'error_max_turns', is_error: true, result: 'hit the turn limit' });
} else if (words[0] === 'odd') {
  process.stdout.write('this is not json\n');
  emit({ type: 'brand_new_event', detail: 42 });
  assistant([{ type: 'thinking', thinking: 'hmm' }, { type: 'text', text: 'odd but fine' }]);
  result(sessionId);
} else {
  delta('Hello ');
  delta('there.');
  assistant([{ type: 'text', text: 'Hello there.' }]);
  result(sessionId);
}
