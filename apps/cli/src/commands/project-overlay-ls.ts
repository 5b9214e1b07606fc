// `grove project overlay ls`: a project's overlay files.
import type { CommandSpec } from '../command.ts';
import { overlayTable } from '../format.ts';

export const overlayLs: CommandSpec<[project: string], { json?: boolean }> = {
  usage: 'ls <project>',
  description: "list a project's overlay files",
  options: [{ flags: '--json', description: 'print JSON' }],
  help: '\nExamples:\n  grove project overlay ls app\n  grove project overlay ls app --json | jq -r ".files[].path"',
  async run(ctx, [name], o) {
    const r = await ctx.api.overlay({ params: { project: name } });
    if (o.json) return ctx.out(JSON.stringify(r));
    ctx.out(overlayTable(r.files, name));
  },
};
