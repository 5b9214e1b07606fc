// `grove logs`: a workspace's audit trail.
import type { CommandSpec } from '../command.ts';

export const logs: CommandSpec<[slug: string], { json?: boolean }> = {
  usage: 'logs <slug>',
  description: "print a workspace's audit trail",
  options: [{ flags: '--json', description: 'print JSON' }],
  help: '\nExamples:\n  grove logs demo~fix-login\n  grove logs demo --json | jq -r .type',
  async run(ctx, [slug], o) {
    const { events } = await ctx.api.events({ query: { slug } });
    for (const e of events) ctx.out(o.json ? JSON.stringify(e) : `${e.at}  ${e.type}  ${JSON.stringify(e.data)}`);
  },
};
