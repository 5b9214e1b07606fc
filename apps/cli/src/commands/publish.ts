// `grove publish`: checkpoint, push the branch and open (or update) its pull request.
import { publishRequestSchema } from '@grove/contracts';
import type { CommandSpec } from '../command.ts';
import { checked } from '../context.ts';

export const publish: CommandSpec<[slug: string], { title?: string; body?: string; message?: string; json?: boolean }> = {
  usage: 'publish <slug>',
  description: "checkpoint, push the workspace's branch to the project's remote and open (or update) its pull request",
  options: [
    { flags: '--title <text>', description: 'pull request title (default: <name> (from Grove workspace <slug>))' },
    { flags: '--body <text>', description: 'pull request description' },
    { flags: '-m, --message <text>', description: 'commit message of the checkpoint taken first, if there is anything to commit' },
    { flags: '--json', description: 'print JSON' },
  ],
  help: "\nNeeds the project's forge (PUT /api/projects/<project>/config {forge}), GROVE_FORGE_TOKEN in the server's environment and a remote.\nExit codes: 7 not configured (says what is missing), 8 push rejected or nothing to publish, 9 remote or forge failed.\n\nExamples:\n  grove publish app~login-fix --title \"Keep the session on reload\"\n  grove publish app~login-fix --json | jq -r .pullRequest.url",
  async run(ctx, [slug], o) {
    const body = checked(publishRequestSchema, { title: o.title, body: o.body, message: o.message });
    if (!o.json) ctx.err(`${slug}: checkpoint, push, pull request…`);
    const r = await ctx.api.publish({ params: { slug }, body });
    if (o.json) return ctx.out(JSON.stringify(r));
    if (r.checkpoint.commit) ctx.err(`${slug}: checkpoint ${r.checkpoint.commit.slice(0, 12)}`);
    ctx.err(`${slug}: pushed ${r.pushed.branch} at ${r.pushed.commit.slice(0, 12)}`);
    ctx.out(`pull request #${r.pullRequest.number} (${r.pullRequest.state}): ${r.pullRequest.url}`);
  },
};
