// `grove logs`: a workspace's audit trail, all of it (read a page at a time) or its newest events.
import type { GroveEvent } from '@grove/contracts';
import { positiveInt, type CommandSpec } from '../command.ts';
import { eventPages } from '../progress.ts';

export const logs: CommandSpec<[slug: string], { json?: boolean; last?: number }> = {
  usage: 'logs <slug>',
  description: "print a workspace's audit trail, oldest first",
  options: [
    { flags: '--json', description: 'print JSON, one event per line' },
    { flags: '-n, --last <n>', description: 'only the newest n events', parse: positiveInt },
  ],
  help: '\nExamples:\n  grove logs demo~fix-login\n  grove logs demo~fix-login -n 20\n  grove logs demo --json | jq -r .type',
  async run(ctx, [slug], o) {
    const line = (e: GroveEvent) => (o.json ? JSON.stringify(e) : `${e.at}  ${e.type}  ${JSON.stringify(e.data)}`);
    // Without --last each page is printed as it comes, so a long trail is never held whole.
    const newest: GroveEvent[] = [];
    let seen = 0;
    for await (const page of eventPages(ctx, slug)) {
      seen += page.length;
      if (o.last === undefined) {
        for (const e of page) ctx.out(line(e));
        continue;
      }
      newest.push(...page);
      newest.splice(0, Math.max(0, newest.length - o.last));
    }
    for (const e of newest) ctx.out(line(e));
    if (seen === 0 && !o.json) ctx.err(`No events for ${slug}.`);
  },
};
