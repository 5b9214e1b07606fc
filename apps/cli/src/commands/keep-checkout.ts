// `grove keep-checkout`: whether a workspace's checkout outlives its merged or closed pull request.
import type { CommandSpec } from '../command.ts';
import { EXIT, Exit } from '../exit.ts';

export const keepCheckout: CommandSpec<[slug: string, setting: string], { json?: boolean }> = {
  usage: 'keep-checkout <slug> <setting>',
  description: 'whether the checkout stays when its pull request is merged or closed: on, off, or default (the project decides)',
  options: [{ flags: '--json', description: 'print the workspace as JSON' }],
  help: '\nExamples:\n  grove keep-checkout demo~fix-login on\n  grove keep-checkout demo~fix-login default',
  async run(ctx, [slug, setting], o) {
    const value = ({ on: true, off: false, default: null } as const)[setting as 'on' | 'off' | 'default'];
    if (value === undefined) throw new Exit(EXIT.usage, `setting must be on, off or default, not "${setting}"`);
    const { workspace } = await ctx.api.updateWorkspace({ params: { slug }, body: { keepCheckoutOnClose: value } });
    if (o.json) return ctx.out(JSON.stringify(workspace));
    const now = workspace.keepCheckoutOnClose;
    ctx.out(`${workspace.slug}: ${now === true ? 'the checkout stays' : now === false ? 'the checkout goes' : 'the project decides'} when its pull request is merged or closed`);
  },
};
