// `grove projects`: the projects workspaces are forked from.
import type { CommandSpec } from '../command.ts';
import { table } from '../format.ts';

export const projects: CommandSpec<[], { json?: boolean }> = {
  usage: 'projects',
  description: 'list projects',
  options: [{ flags: '--json', description: 'print JSON' }],
  help: '\nExamples:\n  grove projects\n  grove projects --json | jq -r ".projects[].name"',
  async run(ctx, _args, o) {
    const list = await ctx.api.listProjects();
    if (o.json) return ctx.out(JSON.stringify(list));
    if (!list.projects.length) return ctx.out('No projects yet. Add one: grove project add <name> <source>');
    ctx.out(table([['NAME', 'DEFAULT BRANCH', 'ADDED'], ...list.projects.map((p) => [p.name, p.defaultBranch, p.createdAt])]));
  },
};
