// stop, start and rm: one request on one workspace, answered with its new state.
import type { endpoints } from '@grove/contracts';
import type { CommandSpec } from '../command.ts';
import { printWorkspace } from '../progress.ts';

/** The table entries these commands call: each takes a slug and answers the workspace. */
type WorkspaceActionEndpoint = typeof endpoints.stop | typeof endpoints.start | typeof endpoints.teardown;

export function workspaceAction(cmd: string, endpoint: WorkspaceActionEndpoint, description: string): CommandSpec<[slug: string], { json?: boolean }> {
  return {
    usage: `${cmd} <slug>`,
    description,
    options: [{ flags: '--json', description: 'print JSON' }],
    help: `\nExample:\n  grove ${cmd} demo~fix-login`,
    async run(ctx, [slug], o) {
      const { workspace } = await ctx.api.request(endpoint, { params: { slug } });
      printWorkspace(ctx, workspace, Boolean(o.json));
    },
  };
}
