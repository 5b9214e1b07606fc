// `grove resume`: reopen a workspace and print its URL; without a slug, pick one (a picker in a terminal).
import type { LastMessage } from '@grove/contracts';
import { ApiError } from '../client.ts';
import type { CommandSpec } from '../command.ts';
import type { CliContext } from '../context.ts';
import { EXIT, Exit } from '../exit.ts';
import { ago, quote, resumeCandidates, resumeTable, table, workspaceUrl } from '../format.ts';
import { runPicker } from '../picker.ts';
import { openRunning } from '../progress.ts';


/** A project's name whose conversation never began: nothing to reopen, and the way to begin it (else null). */
async function neverBegun(ctx: CliContext, slug: string, e: unknown): Promise<ApiError | null> {
  if (slug.includes('~') || !(e instanceof ApiError) || e.code !== 'workspace_not_found') return null;
  const { projects } = await ctx.api.listProjects().catch(() => ({ projects: [] }));
  if (!projects.some((p) => p.name === slug)) return null;
  return new ApiError(404, 'workspace_not_found', `${slug} has no conversation to reopen yet; begin it with: grove send ${slug} "<message>" (or fork: grove fork ${slug} <name>)`);
}

/** Open one workspace: start it (with progress) when it is stopped, wait when it is starting; print its URL. */
async function resumeOne(ctx: CliContext, slug: string, json: boolean): Promise<void> {
  const workspace = await openRunning(ctx, slug, { quiet: json }).catch(async (e: unknown) => {
    throw (await neverBegun(ctx, slug, e)) ?? e;
  });
  if (json) return ctx.out(JSON.stringify({ ...workspace, url: workspaceUrl(ctx.env.url, workspace) }));
  ctx.err(`${workspace.slug}: ${workspace.state}`);
  ctx.out(workspaceUrl(ctx.env.url, workspace));
}

export const resume: CommandSpec<[slug: string | undefined], { json?: boolean; project?: string }> = {
  usage: 'resume [slug]',
  description: 'reopen a workspace (starting its sandbox if stopped) and print its URL; without a slug, pick one: most recent first, with state and last message',
  options: [
    { flags: '--json', description: 'print JSON (the list without a slug, the workspace with one)' },
    { flags: '-p, --project <project>', description: 'only this project' },
  ],
  help: '\nIn a terminal, `grove resume` opens a picker: ↑/↓ or j/k move, a number + Enter chooses, Esc/q/Ctrl-C cancels (exit 130).\nOtherwise it prints the list and exits 0.\n\nExamples:\n  grove resume               # pick one\n  grove resume demo~fix-1    # reopen this one\n  grove resume --json | jq -r ".workspaces[0].slug"',
  async run(ctx, [slug], o) {
    if (slug) return resumeOne(ctx, slug, Boolean(o.json));
    const list = await ctx.api.listWorkspaces({ query: { project: o.project || undefined } });
    const candidates = resumeCandidates(list.workspaces);
    const rows = await Promise.all(
      candidates.map(async (workspace) => ({
        workspace,
        // The quote is a nicety: a workspace whose thread cannot be read is listed without it.
        lastMessage: await ctx.api.lastMessage({ params: { slug: workspace.slug } }).then(
          (r) => r.lastMessage,
          (): LastMessage | null => null,
        ),
      })),
    );
    const now = Date.now();
    const { running, cap } = list.capacity;
    if (o.json || !ctx.stdin.isTTY || !ctx.stdout.isTTY) {
      if (o.json) return ctx.out(JSON.stringify({ workspaces: rows.map((r) => ({ ...r.workspace, lastMessage: r.lastMessage, url: workspaceUrl(ctx.env.url, r.workspace) })), capacity: list.capacity }));
      if (!rows.length) return ctx.out('No workspaces to resume. Fork one: grove fork <project> <name>');
      ctx.out(resumeTable(rows, now));
      return ctx.out(`\n${running} / ${cap} sandboxes running. Reopen one: grove resume <slug>`);
    }
    if (!rows.length) return ctx.out('No workspaces to resume. Fork one: grove fork <project> <name>');
    const width = ctx.stdout.columns || 80;
    const lines = table(rows.map((r) => [r.workspace.slug, r.workspace.state, ago(r.workspace.lastActivityAt, now), quote(r.lastMessage, Math.max(20, width - 60))])).split('\n');
    const chosen = await runPicker(`Resume a workspace (${running} / ${cap} sandboxes running):`, lines, { input: ctx.stdin, output: ctx.stdout });
    const pick = chosen === null ? undefined : rows[chosen];
    if (!pick) throw new Exit(EXIT.cancelled, 'cancelled');
    await resumeOne(ctx, pick.workspace.slug, false);
  },
};
