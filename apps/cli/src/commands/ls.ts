// `grove ls`: the workspaces and how many sandboxes run.
import type { ListWorkspacesResponse, Workspace } from '@grove/contracts';
import type { CommandSpec } from '../command.ts';
import type { CliContext } from '../context.ts';
import { ago, prCell, table } from '../format.ts';

function printList(ctx: CliContext, list: ListWorkspacesResponse): void {
  const { running, creating, cap, queued, warm } = list.capacity;
  const state = (w: Workspace) => (w.state === 'queued' && w.queuePosition !== null ? `queued (#${w.queuePosition})` : w.state);
  const now = Date.now();
  // "5m ago", as `grove resume` says it; --json keeps the exact time for scripts.
  const rows = [['SLUG', 'STATE', 'BRANCH', 'PR', 'LAST ACTIVITY'], ...list.workspaces.map((w) => [w.slug, state(w), w.branch, prCell(w.pullRequest), ago(w.lastActivityAt, now)])];
  ctx.out(list.workspaces.length ? table(rows) : 'No workspaces yet. Fork one: grove fork <project> <name>');
  // The dashboard's meter in words, warm sandboxes (GROVE_WARM_POOL, ready for the next fork) included.
  ctx.out(`\n${running} / ${cap} sandboxes running${creating ? ` (${creating} starting)` : ''}${queued ? `, ${queued} waiting in line` : ''}${warm ? `, ${warm} warm` : ''}`);
}

export const ls: CommandSpec<[], { json?: boolean; all?: boolean; project?: string }> = {
  usage: 'ls',
  description: 'list workspaces and how many sandboxes run',
  options: [
    { flags: '--json', description: 'print JSON' },
    { flags: '--all', description: 'include torn-down workspaces' },
    { flags: '-p, --project <project>', description: 'only this project' },
  ],
  help: '\nExamples:\n  grove ls\n  grove ls --all --json | jq -r ".workspaces[].slug"',
  async run(ctx, _args, o) {
    const list = await ctx.api.listWorkspaces({ query: { all: o.all ? '1' : undefined, project: o.project || undefined } });
    if (o.json) ctx.out(JSON.stringify(list));
    else printList(ctx, list);
  },
};
