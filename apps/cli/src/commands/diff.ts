// `grove diff`: what a workspace changed since it forked, as a patch git can apply, or as a stat.
import type { CommandSpec } from '../command.ts';
import { diffHeadline, diffStat, printable } from '../format.ts';

export const diff: CommandSpec<[slug: string], { stat?: boolean; json?: boolean }> = {
  usage: 'diff <slug>',
  description: 'what a workspace changed since it forked (its branch plus work not yet checkpointed), and where it stands against the default branch',
  options: [
    { flags: '--stat', description: 'only the files with their +/- line counts' },
    { flags: '--json', description: 'print JSON (files, ahead/behind, the patch)' },
  ],
  help: '\nExamples:\n  grove diff app~login-fix | less -R\n  grove diff app~login-fix --stat\n  grove diff app~login-fix --json | jq .ahead',
  async run(ctx, [slug], o) {
    const d = await ctx.api.diff({ params: { slug } });
    if (o.json) return ctx.out(JSON.stringify(d));
    // The summary goes to stderr so that `grove diff <slug> > x.patch` writes a patch git can apply.
    if (o.stat) {
      ctx.out(diffHeadline(d));
      return ctx.out(diffStat(d.files));
    }
    ctx.err(diffHeadline(d));
    // On a terminal the agent's bytes could be escape sequences it acts on; redirected, the patch stays byte for byte.
    const patch = ctx.stdout.isTTY ? printable(d.patch) : d.patch;
    if (patch) ctx.stdout.write(patch.endsWith('\n') ? patch : `${patch}\n`);
    if (d.truncated) ctx.err('grove: the patch was cut at 1 MiB; see the whole of it in the workspace');
  },
};
