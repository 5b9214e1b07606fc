// stop, start and rm: one request on one workspace, answered with its new state.
import { workspaceResponseSchema } from '@grove/contracts';
import type { CommandSpec } from '../command.ts';
import { printWorkspace } from '../progress.ts';

export function workspaceAction(cmd: string, request: { method: 'POST' | 'DELETE'; suffix: string }, description: string): CommandSpec<[slug: string], { json?: boolean }> {
  return {
    usage: `${cmd} <slug>`,
    description,
    options: [{ flags: '--json', description: 'print JSON' }],
    help: `\nExample:\n  grove ${cmd} demo~fix-login`,
    async run(ctx, [slug], o) {
      const { workspace } = await ctx.call(workspaceResponseSchema, request.method, `/api/workspaces/${encodeURIComponent(slug)}${request.suffix}`);
      printWorkspace(ctx, workspace, Boolean(o.json));
    },
  };
}
