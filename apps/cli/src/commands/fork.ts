// `grove fork`: a new workspace, waited for until it runs; optionally the first message to its agent.
import { makeSlug, postMessageRequestSchema, postMessageResponseSchema } from '@grove/contracts';
import { positiveInt, type CommandSpec } from '../command.ts';
import { EXIT, Exit } from '../exit.ts';
import { workspaceUrl } from '../format.ts';
import { lastEventId, printReady, untilRunning, withProgress } from '../progress.ts';

type ForkOptions = { from?: string; pr?: number; keepCheckout?: boolean; message?: string; queue?: boolean; json?: boolean };

export const fork: CommandSpec<[project: string, name: string], ForkOptions> = {
  usage: 'fork <project> <name>',
  description: 'fork a new workspace (its own branch, worktree and sandbox) and wait until it is ready',
  options: [
    { flags: '--from <ref>', description: 'branch or commit to start from (default: the project default branch)' },
    { flags: '-m, --message <text>', description: 'first message to the agent, sent once the workspace is ready' },
    { flags: '--pr <number>', description: "start from this pull request's head (fetched from the project's remote; the default branch, with the reason recorded, when it cannot be)", parse: positiveInt },
    { flags: '--keep-checkout', description: 'keep the checkout when its pull request is merged or closed (overrides the project setting)' },
    { flags: '--queue', description: 'when every sandbox slot is taken, wait in line instead of failing (it stays in line if you interrupt; `grove rm` cancels)' },
    { flags: '--json', description: 'print the workspace as JSON' },
  ],
  help: '\nExamples:\n  grove fork demo fix-login\n  grove fork demo try-again --from grove/fix-login -m "make the login form remember the email"\n  grove fork demo review-42 --pr 42',
  async run(ctx, [project, name], o) {
    if (o.from !== undefined && o.pr !== undefined) throw new Exit(EXIT.usage, 'give --from or --pr, not both');
    // Checked before anything is created: a bad message must not leave a fresh workspace behind with nothing said.
    const first = o.message === undefined ? null : postMessageRequestSchema.safeParse({ text: o.message });
    if (first && !first.success) throw new Exit(EXIT.usage, `-m: ${first.error.issues[0]?.message ?? 'invalid message'}`);
    const after = await lastEventId(ctx, makeSlug(project, name)).catch(() => 0);
    const body = {
      project,
      name,
      ...(o.from ? { from: o.from } : {}),
      ...(o.pr !== undefined ? { pullRequest: o.pr } : {}),
      ...(o.keepCheckout ? { keepCheckoutOnClose: true } : {}),
      ...(o.queue ? { queue: true } : {}),
    };
    const accepted = await ctx.api.fork({ query: { wait: 'false' }, body });
    const slug = accepted.workspace.slug;
    const ready = await withProgress(ctx, untilRunning(ctx, slug), { slug, after, quiet: Boolean(o.json) });
    if (!first?.success) return printReady(ctx, ready, Boolean(o.json));
    // The agent's reply streams in the dashboard (and `grove logs` has the sandbox's side); here we only hand it over.
    const sent = await ctx.api.raw({ method: 'POST', path: `/w/${encodeURIComponent(slug)}/messages`, schema: postMessageResponseSchema, body: first.data });
    if (o.json) return ctx.out(JSON.stringify({ ...ready, url: workspaceUrl(ctx.env.url, ready), message: sent }));
    printReady(ctx, ready, false);
    ctx.err(`message sent (turn ${sent.turn})`);
  },
};
