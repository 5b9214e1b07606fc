// `grove project config`: a project's config with its defaults, or a change of some keys (PATCH).
import { projectConfigPatchSchema } from '@grove/contracts';
import { repeatable, type CommandSpec } from '../command.ts';
import { ConfigArgError, configPatch } from '../config-args.ts';
import { checked } from '../context.ts';
import { EXIT, Exit } from '../exit.ts';

export const projectConfig: CommandSpec<[project: string], { set: string[]; unset: string[]; json?: boolean }> = {
  usage: 'config <project>',
  description: "show a project's config (agent, allowedPaths, egress, git, forge, keepCheckoutOnClose, overlay) with its defaults, or change some keys",
  options: [
    repeatable('--set <key=json>', 'set one key to a JSON value (repeatable)'),
    repeatable('--unset <key>', 'remove one key, back to its default (repeatable)'),
    { flags: '--json', description: 'print JSON on one line' },
  ],
  help: "\nExamples:\n  grove project config app\n  grove project config app --set keepCheckoutOnClose=true\n  grove project config app --set 'allowedPaths=[\"src/**\"]' --unset forge\n\nOnly the keys named change; the rest stays as stored. Sandboxes created from now on use it. docs/agents.md has every key.",
  async run(ctx, [name], o) {
    let r;
    if (o.set.length || o.unset.length) {
      let patch: Record<string, unknown>;
      try {
        patch = configPatch(o.set, o.unset);
      } catch (e) {
        if (e instanceof ConfigArgError) throw new Exit(EXIT.usage, e.message);
        throw e;
      }
      r = await ctx.api.patchProjectConfig({ params: { project: name }, body: checked(projectConfigPatchSchema, patch) });
      ctx.err(`${name}: ${[...o.set.map((s) => s.slice(0, s.indexOf('='))), ...o.unset].join(', ')} changed; sandboxes created from now on use it`);
    } else {
      r = await ctx.api.projectConfig({ params: { project: name } });
    }
    ctx.out(o.json ? JSON.stringify(r.config) : JSON.stringify(r.config, null, 2));
  },
};
