// `grove project add`: a project from a repository (cloned bare under GROVE_HOME).
import type { CommandSpec } from '../command.ts';

export const projectAdd: CommandSpec<[name: string, source: string], { json?: boolean }> = {
  usage: 'add <name> <source>',
  description: 'add a project from a repository: an absolute path, a file://, https:// or ssh:// URL, or user@host:path (cloned bare under GROVE_HOME; nothing is started until its first message or fork)',
  options: [{ flags: '--json', description: 'print JSON' }],
  help: '\nExamples:\n  grove project add app https://git.example.com/team/app.git\n  grove project add tools /srv/git/tools.git\n\nExit codes: 8 when the name is taken, 9 when the repository cannot be reached or refuses the credentials.',
  async run(ctx, [name, source], o) {
    const { project: p } = await ctx.api.addProject({ body: { name, source } });
    if (o.json) return ctx.out(JSON.stringify(p));
    ctx.out(`project ${p.name} added (default branch ${p.defaultBranch})`);
    ctx.err(`Talk to its agent: grove send ${p.name} "<message>" (its conversation begins then), or fork a workspace: grove fork ${p.name} <name>`);
  },
};
