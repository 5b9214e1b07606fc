// `grove checkpoint`: commit a workspace's changes on its branch, from the host.
import { checkpointRequestSchema } from '@grove/contracts';
import type { CommandSpec } from '../command.ts';
import { checked } from '../context.ts';

export const checkpoint: CommandSpec<[slug: string], { message?: string; json?: boolean }> = {
  usage: 'checkpoint <slug>',
  description: "commit a workspace's changes on its branch, from the host (nothing to commit is not an error)",
  options: [
    { flags: '-m, --message <text>', description: 'commit message (default: grove: checkpoint of <slug>)' },
    { flags: '--json', description: 'print JSON' },
  ],
  help: '\nExamples:\n  grove checkpoint app~login-fix -m "Login: keep the session on reload"\n  grove checkpoint app~login-fix --json | jq -r .commit',
  async run(ctx, [slug], o) {
    const body = checked(checkpointRequestSchema, o.message === undefined ? {} : { message: o.message });
    const r = await ctx.api.checkpoint({ params: { slug }, body });
    if (o.json) return ctx.out(JSON.stringify(r));
    if (!r.commit) return ctx.out(`nothing to checkpoint: ${r.branch} already holds everything in ${slug}`);
    ctx.out(`${r.branch}: ${r.commit.slice(0, 12)} (${r.files.length} ${r.files.length === 1 ? 'file' : 'files'})`);
  },
};
