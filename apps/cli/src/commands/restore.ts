// `grove restore`: a torn-down workspace's saved work back as a new workspace, or the list of it.
import { makeSlug, parseSlug } from '@grove/contracts';
import { ApiError } from '../client.ts';
import { positiveInt, type CommandSpec } from '../command.ts';
import { table } from '../format.ts';
import { lastEventId, printReady, untilRunning, withProgress } from '../progress.ts';


export const restore: CommandSpec<[slug: string], { name?: string; number?: number; list?: boolean; json?: boolean }> = {
  usage: 'restore <slug>',
  description: "bring back a torn-down workspace's saved work (refs/grove/<slug>/teardown/<n>) as a new workspace",
  options: [
    { flags: '--name <name>', description: 'name of the new workspace (default: <name>-restored)' },
    { flags: '-n, --number <n>', description: 'which saved work (default: the newest; see --list)', parse: positiveInt },
    { flags: '--list', description: 'only list the saved work of <slug>' },
    { flags: '--json', description: 'print JSON' },
  ],
  help: '\nExamples:\n  grove restore demo~fix-1 --list\n  grove restore demo~fix-1 --name fix-1-again\n  grove restore demo~fix-1 -n 1 --name first-try',
  async run(ctx, [slug], o) {
    const { saved } = await ctx.api.savedWork({ params: { slug } });
    if (o.list) {
      if (o.json) return ctx.out(JSON.stringify({ saved }));
      if (!saved.length) return ctx.out(`No saved work for ${slug}.`);
      return ctx.out(table([['N', 'REF', 'COMMIT'], ...saved.map((s) => [String(s.n), s.ref, s.commit.slice(0, 12)])]));
    }
    const { project, name: oldName } = parseSlug(slug);
    if (!saved.length) {
      const branch = await ctx.api.getWorkspace({ params: { slug } }).then(
        (r) => r.workspace.branch,
        () => null,
      );
      const way = branch ? `; its branch is kept: grove fork ${project} <name> --from ${branch}` : '';
      throw new ApiError(404, 'not_found', `no saved work for "${slug}" (nothing was left uncommitted when it was removed)${way}`);
    }
    const name = o.name ?? `${oldName}-restored`;
    const after = await lastEventId(ctx, makeSlug(project, name)).catch(() => 0);
    const accepted = await ctx.api.restore({ params: { slug }, query: { wait: 'false' }, body: { name, ...(o.number ? { n: o.number } : {}) } });
    const target = accepted.workspace.slug;
    const json = Boolean(o.json);
    printReady(ctx, await withProgress(ctx, untilRunning(ctx, target), { slug: target, after, quiet: json }), json);
  },
};
