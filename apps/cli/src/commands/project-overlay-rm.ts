// `grove project overlay rm`: one overlay file no longer given to workspaces.
import type { CommandSpec } from '../command.ts';
import { overlayTable } from '../format.ts';

export const overlayRm: CommandSpec<[project: string, path: string], { json?: boolean }> = {
  usage: 'rm <project> <path>',
  description: 'remove an overlay file; workspaces forked or reopened from now on no longer get it',
  options: [{ flags: '--json', description: 'print JSON' }],
  help: '\nExamples:\n  grove project overlay rm app .env',
  async run(ctx, [name, file], o) {
    const r = await ctx.api.deleteOverlayFile({ params: { project: name }, query: { path: file } });
    if (o.json) return ctx.out(JSON.stringify(r));
    ctx.err(`${name}: ${file} removed from the overlay`);
    ctx.out(overlayTable(r.files, name));
  },
};
