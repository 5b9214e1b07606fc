// `grove logs`: a workspace's audit trail, all of it (read a page at a time) or its newest events, and then
// (with --follow) what happens next.
import { setTimeout as sleep } from 'node:timers/promises';
import type { GroveEvent } from '@grove/contracts';
import { positiveInt, type CommandSpec } from '../command.ts';
import { printable } from '../format.ts';
import { POLL_MS, eventPages } from '../progress.ts';

export const logs: CommandSpec<[slug: string], { json?: boolean; last?: number; follow?: boolean }> = {
  usage: 'logs <slug>',
  description: "print a workspace's audit trail, oldest first",
  options: [
    { flags: '--json', description: 'print JSON, one event per line' },
    { flags: '-n, --last <n>', description: 'only the newest n events', parse: positiveInt },
    { flags: '-f, --follow', description: 'then keep printing new events as they happen (Ctrl-C stops)' },
  ],
  help: '\nExamples:\n  grove logs demo~fix-login\n  grove logs demo~fix-login -n 20 -f\n  grove logs demo --json | jq -r .type',
  async run(ctx, [slug], o) {
    // JSON escapes C0 controls but not C1 ones (U+0080-U+009F), and event data can hold what an agent wrote.
    const line = (e: GroveEvent) => (o.json ? JSON.stringify(e) : printable(`${e.at}  ${e.type}  ${JSON.stringify(e.data)}`));
    // Without --last each page is printed as it comes, so a long trail is never held whole.
    const newest: GroveEvent[] = [];
    let after = 0;
    for await (const page of eventPages(ctx, slug)) {
      after = page.at(-1)?.id ?? after;
      if (o.last === undefined) {
        for (const e of page) ctx.out(line(e));
        continue;
      }
      newest.push(...page);
      newest.splice(0, Math.max(0, newest.length - o.last));
    }
    for (const e of newest) ctx.out(line(e));
    if (after === 0) {
      // No trail at all: a slug nobody made (a typo) ends as every other command's unknown slug does (exit 3),
      // before --follow could wait on it forever. A torn-down workspace keeps its trail, so it never gets here.
      await ctx.api.getWorkspace({ params: { slug } });
      if (!o.json) ctx.err(`No events for ${slug} yet.`);
    }
    if (!o.follow) return;
    // The same short poll as fork's progress, from the last id printed.
    for (;;) {
      await sleep(POLL_MS);
      for await (const page of eventPages(ctx, slug, after)) {
        for (const e of page) ctx.out(line(e));
        after = page.at(-1)?.id ?? after;
      }
    }
  },
};
