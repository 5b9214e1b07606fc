// `grove send`: a message to a workspace's agent (its sandbox started first when it is stopped), then the agent's
// reply once the turn ends; --no-wait returns as soon as the message is taken.
import { setTimeout as sleep } from 'node:timers/promises';
import { postMessageRequestSchema, postMessageResponseSchema, turnEndedDataSchema, type LastMessage, type PostMessageRequest, type PostMessageResponse, type TurnEndedData } from '@grove/contracts';
import { ApiError } from '../client.ts';
import type { CommandSpec } from '../command.ts';
import type { CliContext } from '../context.ts';
import { EXIT, Exit } from '../exit.ts';
import { printable, workspaceUrl } from '../format.ts';
import { POLL_MS, eventPages, lastEventId, openRunning } from '../progress.ts';

/** Events after which no turn.ended will come: the sandbox went away in the middle of the turn. */
const ENDS_THE_SANDBOX = new Set(['workspace.stopped', 'sandbox.died', 'sandbox.oom', 'workspace.teardown', 'workspace.reconciled']);

/** The turn.ended event of `turn`, polled from event `after` on. */
async function turnEnd(ctx: CliContext, slug: string, turn: string, after: number): Promise<TurnEndedData> {
  let cursor = after;
  for (;;) {
    for await (const page of eventPages(ctx, slug, cursor)) {
      for (const e of page) {
        cursor = e.id;
        if (ENDS_THE_SANDBOX.has(e.type)) throw new Exit(EXIT.error, `${slug} stopped before the reply ended (${e.type})`);
        if (e.type !== 'turn.ended') continue;
        const data = turnEndedDataSchema.safeParse(e.data);
        if (data.success && data.data.turn === turn) return data.data;
      }
    }
    await sleep(POLL_MS);
  }
}

/** What the agent said after the newest message of the user: this turn's reply, read from the thread on the host. */
async function replyOf(ctx: CliContext, slug: string): Promise<LastMessage[]> {
  const { messages } = await ctx.api.recentMessages({ params: { slug } });
  const lastUser = messages.map((m) => m.who).lastIndexOf('user');
  return messages.slice(lastUser + 1).filter((m) => m.who === 'agent');
}

/** How long a queued message waits for a turn.ended before it asks again anyway (an event read that missed it). */
const QUEUE_RETRY_MS = 5_000;

/** Until a turn.ended after `after` (its id), or QUEUE_RETRY_MS; the sandbox going away ends the wait with an error. */
async function nextTurnEnd(ctx: CliContext, slug: string, after: number): Promise<number> {
  const until = Date.now() + QUEUE_RETRY_MS;
  let cursor = after;
  while (Date.now() < until) {
    for await (const page of eventPages(ctx, slug, cursor)) {
      for (const e of page) {
        cursor = e.id;
        if (ENDS_THE_SANDBOX.has(e.type)) throw new Exit(EXIT.error, `${slug} stopped while the message waited (${e.type})`);
        if (e.type === 'turn.ended') return cursor;
      }
    }
    await sleep(POLL_MS);
  }
  return cursor;
}

/**
 * The message, handed over: with `queue`, a refusal because another reply is running (409) waits for that reply to
 * end and asks again, as the dashboard's composer queues; without it the refusal is the answer (exit 8).
 */
async function handOver(ctx: CliContext, o: { slug: string; body: PostMessageRequest; after: number; queue: boolean; quiet: boolean }): Promise<PostMessageResponse> {
  const { slug, body, queue, quiet } = o;
  let cursor = o.after;
  let told = false;
  for (;;) {
    try {
      return await ctx.api.raw({ method: 'POST', path: `/w/${encodeURIComponent(slug)}/messages`, schema: postMessageResponseSchema, body });
    } catch (e) {
      if (!queue || !(e instanceof ApiError && e.status === 409 && e.code === 'invalid_state')) throw e;
      if (!quiet && !told) ctx.err(`${slug}: another reply is running; the message goes out when it ends…`);
      told = true;
      cursor = await nextTurnEnd(ctx, slug, cursor);
    }
  }
}

async function readStdin(ctx: CliContext): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of ctx.stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  return Buffer.concat(chunks).toString('utf8').replace(/\n$/, '');
}

export const send: CommandSpec<[slug: string, words: string[]], { wait: boolean; queue?: boolean; json?: boolean }> = {
  usage: 'send <slug> <message...>',
  description: "send a message to a workspace's agent (reopening it if stopped) and print the reply when the turn ends",
  options: [
    { flags: '--no-wait', description: 'return once the message is taken (prints the turn id)' },
    { flags: '--queue', description: 'while another reply runs, wait for it to end and send then (instead of exit 8)' },
    { flags: '--json', description: 'print JSON (the turn, how it ended, the reply)' },
  ],
  help: [
    '',
    'The message is the rest of the line; "-" reads it from stdin. A reply longer than 4000 characters is cut; the',
    'dashboard has all of it. A project\'s name is its conversation (its default workspace): the first message to a',
    'project added with `grove project add` begins it, waiting in line when every sandbox is in use.',
    'Exit 1 when the turn failed or was stopped, 8 while another reply is still running (--queue waits for it).',
    '',
    'Examples:',
    '  grove send demo~fix-login "run the tests and fix what fails"',
    '  grove send demo~fix-login - < task.md',
    '  grove send demo "what changed today?" --json | jq -r ".reply[].text"',
  ].join('\n'),
  async run(ctx, [slug, words], o) {
    const raw = words.length === 1 && words[0] === '-' ? await readStdin(ctx) : words.join(' ');
    const parsed = postMessageRequestSchema.safeParse({ text: raw.trim() === '' ? '' : raw });
    if (!parsed.success) throw new Exit(EXIT.usage, `message: ${parsed.error.issues[0]?.message ?? 'invalid message'}`);
    const workspace = await openRunning(ctx, slug, { quiet: Boolean(o.json), begin: true });
    // Read before sending, so the end of this turn is not missed however fast it comes.
    const after = await lastEventId(ctx, slug);
    const sent = await handOver(ctx, { slug, body: parsed.data, after, queue: Boolean(o.queue), quiet: Boolean(o.json) });
    if (!o.wait) {
      if (o.json) return ctx.out(JSON.stringify(sent));
      ctx.err(`${slug}: message sent; the reply is in ${workspaceUrl(ctx.env.url, workspace)}`);
      return ctx.out(sent.turn);
    }
    if (!o.json) ctx.err(`${slug}: message sent (${sent.turn}), waiting for the reply…`);
    const end = await turnEnd(ctx, slug, sent.turn, after);
    const reply = end.outcome === 'completed' ? await replyOf(ctx, slug) : [];
    if (o.json) ctx.out(JSON.stringify({ turn: sent.turn, outcome: end.outcome, error: end.error, reply }));
    else for (const m of reply) ctx.out(printable(m.text));
    if (end.outcome === 'failed') throw new Exit(EXIT.error, `the turn failed: ${printable(end.error ?? 'no reason was given')}`);
    if (end.outcome === 'cancelled') throw new Exit(EXIT.error, 'the reply was stopped before it ended');
  },
};
