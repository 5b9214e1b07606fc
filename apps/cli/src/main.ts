// `grove`: the command line of Grove; talks only to the registry API, with the contracts schemas.
import { Command, CommanderError } from 'commander';
import {
  eventsResponseSchema,
  listWorkspacesResponseSchema,
  workspaceResponseSchema,
  forkAcceptedResponseSchema,
  type GroveEvent,
  type ListWorkspacesResponse,
  type Workspace,
} from '@grove/contracts';
import { ApiError, createClient } from './client.ts';
import { loadCliEnv } from './env.ts';

/** Exit codes scripts can rely on. */
export const EXIT = { ok: 0, error: 1, usage: 2, notFound: 3, capacity: 4, unreachable: 5, unauthorized: 6 } as const;

const PHASES: Record<string, string> = {
  'workspace.queued': 'all sandbox slots in use: waiting in line',
  'workspace.promoted': 'a slot freed: starting',
  'workspace.reserved': 'slot reserved',
  'workspace.prepared': 'worktree ready',
  'sandbox.started': 'sandbox started',
  'workspace.registered': 'ready',
  spawn_failed: 'failed',
};

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows.map((r) => r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd()).join('\n');
}

function printList(list: ListWorkspacesResponse): void {
  const { running, creating, cap, queued } = list.capacity;
  const state = (w: Workspace) => (w.state === 'queued' && w.queuePosition !== null ? `queued (#${w.queuePosition})` : w.state);
  const rows = [['SLUG', 'STATE', 'BRANCH', 'LAST ACTIVITY'], ...list.workspaces.map((w) => [w.slug, state(w), w.branch, w.lastActivityAt ?? '-'])];
  process.stdout.write(`${list.workspaces.length ? table(rows) : 'No workspaces yet. Fork one: grove fork <project> <name>'}\n`);
  process.stdout.write(`\n${running} / ${cap} sandboxes running${creating ? ` (${creating} starting)` : ''}${queued ? `, ${queued} waiting in line` : ''}\n`);
}

function printWorkspace(w: Workspace, json: boolean): void {
  process.stdout.write(json ? `${JSON.stringify(w)}\n` : `${w.slug}: ${w.state}${w.failureReason ? ` (${w.failureReason})` : ''}\n`);
}

export function buildProgram(): Command {
  const env = loadCliEnv();
  const { call } = createClient(env);
  const program = new Command('grove')
    .description('Run coding agents in parallel, each in its own sandboxed workspace.')
    .addHelpText('after', `\nEnvironment: GROVE_URL (default http://localhost:4300), GROVE_TOKEN (default: read from GROVE_HOME/token).\nExit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 capacity reached, 5 Grove unreachable, 6 unauthorized.`)
    .exitOverride()
    .showHelpAfterError();

  program
    .command('ls')
    .description('list workspaces and how many sandboxes run')
    .option('--json', 'print JSON')
    .option('--all', 'include torn-down workspaces')
    .option('-p, --project <project>', 'only this project')
    .action(async (o: { json?: boolean; all?: boolean; project?: string }) => {
      const q = new URLSearchParams();
      if (o.all) q.set('all', '1');
      if (o.project) q.set('project', o.project);
      const list = await call(listWorkspacesResponseSchema, 'GET', `/api/workspaces${q.size ? `?${q}` : ''}`);
      if (o.json) process.stdout.write(`${JSON.stringify(list)}\n`);
      else printList(list);
    });

  program
    .command('fork <project> <name>')
    .description('fork a new workspace (its own branch, worktree and sandbox) and wait until it is ready')
    .option('--from <ref>', 'branch or commit to start from (default: the project default branch)')
    .option('--queue', 'when every sandbox slot is taken, wait in line instead of failing (it stays in line if you interrupt; `grove rm` cancels)')
    .option('--json', 'print the workspace as JSON')
    .action(async (project: string, name: string, o: { from?: string; queue?: boolean; json?: boolean }) => {
      const body = { project, name, ...(o.from ? { from: o.from } : {}), ...(o.queue ? { queue: true } : {}) };
      const accepted = await call(forkAcceptedResponseSchema, 'POST', '/api/workspaces?wait=false', body);
      const slug = accepted.workspace.slug;
      const seen = new Set<number>();
      for (;;) {
        const { events } = await call(eventsResponseSchema, 'GET', `/api/events?slug=${encodeURIComponent(slug)}`);
        for (const e of events.filter((x: GroveEvent) => !seen.has(x.id))) {
          seen.add(e.id);
          const phase = PHASES[e.type];
          const detail = e.type === 'spawn_failed' ? ` - ${String(e.data.reason ?? '')}` : e.type === 'workspace.queued' ? ` (#${String(e.data.position ?? '?')})` : '';
          if (phase && !o.json) process.stderr.write(`${slug}: ${phase}${detail}\n`);
        }
        const { workspace } = await call(workspaceResponseSchema, 'GET', `/api/workspaces/${encodeURIComponent(slug)}`);
        if (workspace.state === 'running') return printWorkspace(workspace, Boolean(o.json));
        if (workspace.state === 'failed' || workspace.state === 'gone') {
          printWorkspace(workspace, Boolean(o.json));
          throw new ApiError(500, 'spawn_failed', workspace.failureReason ?? 'fork failed');
        }
        await new Promise((r) => setTimeout(r, 250));
      }
    });

  for (const [cmd, method, suffix, text] of [
    ['stop', 'POST', '/stop', 'stop a workspace (frees a sandbox slot, keeps everything)'],
    ['start', 'POST', '/start', 'reopen a stopped workspace'],
    ['rm', 'DELETE', '', 'tear a workspace down (its branch is kept)'],
  ] as const) {
    program
      .command(`${cmd} <slug>`)
      .description(text)
      .option('--json', 'print JSON')
      .action(async (slug: string, o: { json?: boolean }) => {
        const { workspace } = await call(workspaceResponseSchema, method, `/api/workspaces/${encodeURIComponent(slug)}${suffix}`);
        printWorkspace(workspace, Boolean(o.json));
      });
  }

  program
    .command('logs <slug>')
    .description("print a workspace's audit trail")
    .option('--json', 'print JSON')
    .action(async (slug: string, o: { json?: boolean }) => {
      const { events } = await call(eventsResponseSchema, 'GET', `/api/events?slug=${encodeURIComponent(slug)}`);
      for (const e of events) process.stdout.write(o.json ? `${JSON.stringify(e)}\n` : `${e.at}  ${e.type}  ${JSON.stringify(e.data)}\n`);
    });

  return program;
}

function exitCodeFor(err: unknown): number {
  if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
  if (err instanceof ApiError) {
    if (err.code === 'unreachable') return EXIT.unreachable;
    if (err.status === 401) return EXIT.unauthorized;
    if (err.status === 404) return EXIT.notFound;
    if (err.status === 429) return EXIT.capacity;
    if (err.status === 422) return EXIT.usage;
  }
  return EXIT.error;
}

export async function run(argv: string[]): Promise<number> {
  try {
    await buildProgram().parseAsync(argv, { from: 'user' });
    return EXIT.ok;
  } catch (err) {
    if (!(err instanceof CommanderError)) process.stderr.write(`grove: ${err instanceof Error ? err.message : String(err)}\n`);
    return exitCodeFor(err);
  }
}
