// `grove`: the command line of Grove; talks only to the registry API, with the contracts schemas.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import {
  eventsResponseSchema,
  healthResponseSchema,
  lastMessageResponseSchema,
  postMessageRequestSchema,
  postMessageResponseSchema,
  listWorkspacesResponseSchema,
  makeSlug,
  parseSlug,
  savedWorkResponseSchema,
  workspaceResponseSchema,
  forkAcceptedResponseSchema,
  checkpointRequestSchema,
  checkpointResponseSchema,
  diffResponseSchema,
  listProjectsResponseSchema,
  overlayListResponseSchema,
  projectConfigPatchSchema,
  projectConfigResponseSchema,
  projectResponseSchema,
  putOverlayFileRequestSchema,
  publishRequestSchema,
  publishResponseSchema,
  type LastMessage,
  type OverlayFileInfo,
  type ListWorkspacesResponse,
  type Workspace,
} from '@grove/contracts';
import type { z } from 'zod';
import { ApiError, createClient } from './client.ts';
import { ConfigArgError, configPatch } from './config-args.ts';
import { loadCliEnv, readHomeToken } from './env.ts';
import { ago, diffHeadline, diffStat, prCell, quote, resumeCandidates, resumeTable, table, workspaceUrl } from './format.ts';
import { runPicker } from './picker.ts';
import { isAlive, logTail, repoRoot, runningPid, serverCommand, serverFiles } from './server-process.ts';

/** Exit codes scripts can rely on. */
export const EXIT = {
  ok: 0,
  error: 1,
  usage: 2,
  notFound: 3,
  capacity: 4,
  unreachable: 5,
  unauthorized: 6,
  /** 409 not_configured: the project has no forge or remote, or the server no GROVE_FORGE_TOKEN. */
  notConfigured: 7,
  /** Any other 409: it exists already, the workspace is in the wrong state, the remote refused the push. */
  conflict: 8,
  /** The project's remote or forge failed (unreachable, refused our credentials, answered an error). */
  remote: 9,
  cancelled: 130,
} as const;

/** Ends the command with this exit code; the message (if any) goes to stderr. */
class Exit extends Error {
  constructor(
    readonly code: number,
    message = '',
  ) {
    super(message);
  }
}

const PHASES: Record<string, string> = {
  'workspace.queued': 'all sandbox slots in use: waiting in line',
  'workspace.promoted': 'a slot freed: starting',
  'workspace.reserved': 'slot reserved',
  'workspace.prepared': 'worktree ready',
  'sandbox.started': 'sandbox started',
  'workspace.registered': 'ready',
  'workspace.started': 'ready',
  spawn_failed: 'failed',
};

const POLL_MS = 250;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const enc = encodeURIComponent;
const out = (s: string): void => void process.stdout.write(`${s}\n`);
const err = (s: string): void => void process.stderr.write(`${s}\n`);

function printList(list: ListWorkspacesResponse): void {
  const { running, creating, cap, queued } = list.capacity;
  const state = (w: Workspace) => (w.state === 'queued' && w.queuePosition !== null ? `queued (#${w.queuePosition})` : w.state);
  const rows = [['SLUG', 'STATE', 'BRANCH', 'PR', 'LAST ACTIVITY'], ...list.workspaces.map((w) => [w.slug, state(w), w.branch, prCell(w.pullRequest), w.lastActivityAt ?? '-'])];
  out(list.workspaces.length ? table(rows) : 'No workspaces yet. Fork one: grove fork <project> <name>');
  out(`\n${running} / ${cap} sandboxes running${creating ? ` (${creating} starting)` : ''}${queued ? `, ${queued} waiting in line` : ''}`);
}

function printWorkspace(w: Workspace, json: boolean): void {
  out(json ? JSON.stringify(w) : `${w.slug}: ${w.state}${w.failureReason ? ` (${w.failureReason})` : ''}`);
}

/** A request body checked with its contracts schema before it is sent; a bad option is a usage error (exit 2). */
function checked<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  throw new Exit(EXIT.usage, `${issue?.path.length ? `--${issue.path.join('.')}: ` : ''}${issue?.message ?? 'invalid option'}`);
}

function positiveInt(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a whole number from 1 up');
  return n;
}

/** A local file the user named (e.g. --from ./.env); a missing or unreadable one is a usage error. */
function readLocal(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new Exit(EXIT.usage, `--from ${file}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (e as Error).message}`);
  }
}

/** All of stdin; from a terminal that would wait for typing, so it says how to give the content instead. */
async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) throw new Exit(EXIT.usage, 'give the content with --from <file> or on stdin (grove project overlay set <project> <path> < file)');
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export function buildProgram(): Command {
  const env = loadCliEnv();
  const { call } = createClient(env);

  /** The id of the newest event of a slug (0 without any), so progress shows only what happens from now on. */
  async function lastEventId(slug: string): Promise<number> {
    let after = 0;
    for (;;) {
      const { events } = await call(eventsResponseSchema, 'GET', `/api/events?slug=${enc(slug)}&after=${after}&limit=1000`);
      after = events.at(-1)?.id ?? after;
      if (events.length < 1000) return after;
    }
  }

  /** Print the lifecycle phases of `slug` (events after `after`) on stderr while `task` runs; then its result. */
  async function withProgress<T>(slug: string, after: number, task: Promise<T>, quiet: boolean): Promise<T> {
    let settled = false;
    const done = task.then(
      () => (settled = true),
      () => (settled = true),
    );
    let cursor = after;
    const pump = async () => {
      const { events } = await call(eventsResponseSchema, 'GET', `/api/events?slug=${enc(slug)}&after=${cursor}&limit=1000`);
      for (const e of events) {
        cursor = e.id;
        const phase = PHASES[e.type];
        const detail = e.type === 'spawn_failed' ? ` - ${String(e.data.reason ?? '')}` : e.type === 'workspace.queued' ? ` (#${String(e.data.position ?? '?')})` : '';
        if (phase && !quiet) err(`${slug}: ${phase}${detail}`);
      }
    };
    // Progress is a courtesy: the task's own answer says whether it worked, so a failed read is skipped.
    while (!settled) {
      await pump().catch(() => undefined);
      await Promise.race([done, sleep(POLL_MS)]);
    }
    await pump().catch(() => undefined);
    return task;
  }

  /** Poll a workspace that is being created until it runs (or its creation failed). */
  async function untilRunning(slug: string): Promise<Workspace> {
    for (;;) {
      const { workspace } = await call(workspaceResponseSchema, 'GET', `/api/workspaces/${enc(slug)}`);
      if (workspace.state === 'running') return workspace;
      // A queued fork waits its turn in line, then starts like any other.
      if (workspace.state !== 'creating' && workspace.state !== 'queued') throw new ApiError(500, 'spawn_failed', `${slug}: ${workspace.state}${workspace.failureReason ? ` - ${workspace.failureReason}` : ''}`);
      await sleep(POLL_MS);
    }
  }

  /** Fork-like: print the running workspace and where the dashboard opens it. */
  function printReady(w: Workspace, json: boolean): void {
    if (json) return out(JSON.stringify({ ...w, url: workspaceUrl(env.url, w) }));
    printWorkspace(w, false);
    out(workspaceUrl(env.url, w));
  }

  async function healthy(): Promise<boolean> {
    try {
      const r = await fetch(`${env.url}/api/health`, { signal: AbortSignal.timeout(2_000) });
      return r.ok && healthResponseSchema.safeParse(await r.json()).success;
    } catch {
      return false;
    }
  }

  const program = new Command('grove')
    .description('Run coding agents in parallel, each in its own sandboxed workspace.')
    .addHelpText(
      'after',
      `\nStart here: grove up (from a clone of Grove), then grove fork <project> <name>, grove resume.\nEnvironment: GROVE_URL (default http://localhost:4300), GROVE_TOKEN (default: read from GROVE_HOME/token), GROVE_HOME (default ~/.grove).\nExit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 capacity reached, 5 Grove unreachable, 6 unauthorized,\n  7 not configured (no forge, remote or GROVE_FORGE_TOKEN), 8 conflict (exists already, wrong state, push rejected),\n  9 remote or forge failed (unreachable, credentials refused), 130 cancelled.`,
    )
    .exitOverride()
    .showHelpAfterError();

  program
    .command('up')
    .description('start Grove from this clone: setup, then the server in the background (log and pid under GROVE_HOME); prints the sign-in link')
    .option('--no-setup', 'skip scripts/setup.sh (npm dependencies, Docker, sandbox image, dashboard build)')
    .option('--foreground', 'keep the server attached to this terminal (Ctrl-C stops it)')
    .option('--timeout <seconds>', 'how long to wait for the server to answer', positiveInt, 180)
    .option('--json', 'print { url, login, pid, log, started } as JSON')
    .addHelpText('after', '\nExamples:\n  grove up                 # setup, start in the background, print the sign-in link\n  grove up --foreground    # the same, attached; Ctrl-C stops it\n  GROVE_URL=http://localhost:4400 grove up --no-setup')
    .action(async (o: { setup: boolean; foreground?: boolean; timeout: number; json?: boolean }) => {
      const files = serverFiles(env.home);
      const report = (pid: number | null, started: boolean) => {
        const token = env.token ?? readHomeToken(env.home);
        const login = token ? `${env.url}/login?token=${enc(token)}` : null;
        if (o.json) return out(JSON.stringify({ url: env.url, login, pid, log: pid === null ? null : files.log, started }));
        out(`Grove is ${started ? 'running' : 'already running'} at ${env.url}${pid === null ? '' : ` (pid ${pid})`}`);
        out(login ? `Sign in: ${login}` : `Sign in with the token in ${path.join(env.home, 'token')} (or GROVE_TOKEN)`);
        if (pid !== null && !o.foreground) out(`Log: ${files.log}\nStop it with: grove down`);
      };
      if (await healthy()) return report(runningPid(files), false);
      const host = new URL(env.url).hostname;
      if (!['localhost', '127.0.0.1', '[::1]'].includes(host)) {
        throw new Error(`nothing answers at ${env.url}, and grove up only starts Grove on this machine (GROVE_URL names ${host})`);
      }

      let pid = runningPid(files);
      let child: ChildProcess | undefined;
      if (pid !== null) {
        err(`a Grove server started earlier (pid ${pid}) does not answer yet; waiting for it`);
      } else {
        const root = repoRoot();
        const cmd = serverCommand(root, process.execPath);
        if (o.setup) {
          err('grove: running scripts/setup.sh (skip with --no-setup)');
          // Setup talks on stderr: stdout stays the command's answer (and JSON with --json).
          const code = await new Promise<number | null>((resolve, reject) => {
            const s = spawn('bash', [path.join(root, 'scripts', 'setup.sh')], { cwd: root, env: env.serverEnv, stdio: ['ignore', process.stderr, process.stderr] });
            s.once('error', reject);
            s.once('exit', resolve);
          });
          if (code !== 0) throw new Error(`scripts/setup.sh failed (exit ${code}); fix what it says above, or skip it with --no-setup`);
        }
        fs.mkdirSync(path.dirname(files.log), { recursive: true, mode: 0o700 });
        const [bin = process.execPath, ...args] = cmd.argv;
        if (o.foreground) {
          child = spawn(bin, args, { cwd: cmd.cwd, env: env.serverEnv, stdio: 'inherit' });
        } else {
          const log = fs.openSync(files.log, 'a');
          // Its own session: the server outlives this command and the terminal it ran in.
          child = spawn(bin, args, { cwd: cmd.cwd, env: env.serverEnv, detached: true, stdio: ['ignore', log, log] });
          fs.closeSync(log);
        }
        const started = child;
        await new Promise<void>((resolve, reject) => {
          started.once('spawn', resolve);
          started.once('error', reject);
        });
        pid = started.pid ?? null;
        if (pid === null) throw new Error('the server process did not start');
        fs.writeFileSync(files.pid, `${pid}\n`, { mode: 0o600 });
        if (!o.foreground) child.unref();
      }

      const serverPid = pid;
      const until = Date.now() + o.timeout * 1000;
      const tty = process.stderr.isTTY;
      const where = o.foreground ? '' : `, log: ${files.log}`;
      let dots = 0;
      if (!tty) err(`grove: starting Grove (pid ${serverPid}${where})`);
      for (;;) {
        if (await healthy()) break;
        if (!isAlive(serverPid) || child?.exitCode != null || child?.signalCode != null) {
          if (tty) process.stderr.write('\n');
          fs.rmSync(files.pid, { force: true });
          throw new Error(`the server exited before it answered${o.foreground ? ' (its output is above)' : `; the end of ${files.log}:\n${logTail(files.log)}`}`);
        }
        if (Date.now() > until) {
          if (tty) process.stderr.write('\n');
          throw new Error(`the server (pid ${serverPid}) does not answer at ${env.url}/api/health after ${o.timeout}s; it keeps starting in the background (see ${files.log}; stop it with grove down)`);
        }
        if (tty) process.stderr.write(`\rgrove: starting Grove (pid ${serverPid}${where}) ${'.'.repeat((dots = (dots % 3) + 1)).padEnd(3)}`);
        await sleep(POLL_MS);
      }
      if (tty) process.stderr.write('\rgrove: Grove answers' + ' '.repeat(40) + '\n');
      report(serverPid, true);

      if (!child || !o.foreground) return;
      // Attached: Ctrl-C reaches the server too (same process group); wait for its graceful exit.
      const attached = child;
      const forward = (signal: NodeJS.Signals) => () => attached.kill(signal);
      process.on('SIGINT', () => undefined);
      process.on('SIGTERM', forward('SIGTERM'));
      const code = await new Promise<number>((resolve) => attached.once('exit', (c, s) => resolve(c ?? (s ? 1 : 0))));
      fs.rmSync(files.pid, { force: true });
      if (code !== 0) throw new Exit(EXIT.error, `the server exited with ${code}`);
    });

  program
    .command('down')
    .description('stop the Grove server started by grove up (SIGTERM, then wait until it has shut down)')
    .option('--timeout <seconds>', 'how long to wait for it to exit', positiveInt, 60)
    .option('--json', 'print { stopped, pid } as JSON')
    .addHelpText('after', '\nExample:\n  grove down    # sandboxes keep running; the next grove up reconnects to them')
    .action(async (o: { timeout: number; json?: boolean }) => {
      const files = serverFiles(env.home);
      const pid = runningPid(files);
      if (pid === null) {
        if (await healthy()) throw new Error(`Grove answers at ${env.url}, but no server started by grove up runs for GROVE_HOME=${env.home} (no live pid in ${files.pid}); stop it where it was started`);
        if (o.json) return out(JSON.stringify({ stopped: false, pid: null }));
        return out('Grove is not running');
      }
      if (!o.json) err(`grove: stopping Grove (pid ${pid})`);
      process.kill(pid, 'SIGTERM');
      const until = Date.now() + o.timeout * 1000;
      while (isAlive(pid)) {
        if (Date.now() > until) throw new Error(`the server (pid ${pid}) did not exit within ${o.timeout}s of SIGTERM; see ${files.log} (kill -9 ${pid} forces it)`);
        await sleep(100);
      }
      fs.rmSync(files.pid, { force: true });
      if (o.json) return out(JSON.stringify({ stopped: true, pid }));
      out(`Grove stopped (pid ${pid}). Sandboxes keep running; grove up reconnects to them.`);
    });

  program
    .command('ls')
    .description('list workspaces and how many sandboxes run')
    .option('--json', 'print JSON')
    .option('--all', 'include torn-down workspaces')
    .option('-p, --project <project>', 'only this project')
    .addHelpText('after', '\nExamples:\n  grove ls\n  grove ls --all --json | jq -r ".workspaces[].slug"')
    .action(async (o: { json?: boolean; all?: boolean; project?: string }) => {
      const q = new URLSearchParams();
      if (o.all) q.set('all', '1');
      if (o.project) q.set('project', o.project);
      const list = await call(listWorkspacesResponseSchema, 'GET', `/api/workspaces${q.size ? `?${q}` : ''}`);
      if (o.json) out(JSON.stringify(list));
      else printList(list);
    });

  program
    .command('fork <project> <name>')
    .description('fork a new workspace (its own branch, worktree and sandbox) and wait until it is ready')
    .option('--from <ref>', 'branch or commit to start from (default: the project default branch)')
    .option('-m, --message <text>', 'first message to the agent, sent once the workspace is ready')
    .option('--pr <number>', "start from this pull request's head (fetched from the project's remote; the default branch, with the reason recorded, when it cannot be)", positiveInt)
    .option('--keep-checkout', 'keep the checkout when its pull request is merged or closed (overrides the project setting)')
    .option('--queue', 'when every sandbox slot is taken, wait in line instead of failing (it stays in line if you interrupt; `grove rm` cancels)')
    .option('--json', 'print the workspace as JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  grove fork demo fix-login\n  grove fork demo try-again --from grove/fix-login -m "make the login form remember the email"\n  grove fork demo review-42 --pr 42',
    )
    .action(async (project: string, name: string, o: { from?: string; pr?: number; keepCheckout?: boolean; message?: string; queue?: boolean; json?: boolean }) => {
      if (o.from !== undefined && o.pr !== undefined) throw new Exit(EXIT.usage, 'give --from or --pr, not both');
      // Checked before anything is created: a bad message must not leave a fresh workspace behind with nothing said.
      const first = o.message === undefined ? null : postMessageRequestSchema.safeParse({ text: o.message });
      if (first && !first.success) throw new Exit(EXIT.usage, `-m: ${first.error.issues[0]?.message ?? 'invalid message'}`);
      const after = await lastEventId(makeSlug(project, name)).catch(() => 0);
      const body = {
        project,
        name,
        ...(o.from ? { from: o.from } : {}),
        ...(o.pr !== undefined ? { pullRequest: o.pr } : {}),
        ...(o.keepCheckout ? { keepCheckoutOnClose: true } : {}),
        ...(o.queue ? { queue: true } : {}),
      };
      const accepted = await call(forkAcceptedResponseSchema, 'POST', '/api/workspaces?wait=false', body);
      const slug = accepted.workspace.slug;
      const ready = await withProgress(slug, after, untilRunning(slug), Boolean(o.json));
      if (!first?.success) return printReady(ready, Boolean(o.json));
      // The agent's reply streams in the dashboard (and `grove logs` has the sandbox's side); here we only hand it over.
      const sent = await call(postMessageResponseSchema, 'POST', `/w/${enc(slug)}/messages`, first.data);
      if (o.json) return out(JSON.stringify({ ...ready, url: workspaceUrl(env.url, ready), message: sent }));
      printReady(ready, false);
      err(`message sent (turn ${sent.turn})`);
    });

  program
    .command('keep-checkout <slug> <setting>')
    .description('whether the checkout stays when its pull request is merged or closed: on, off, or default (the project decides)')
    .option('--json', 'print the workspace as JSON')
    .addHelpText('after', '\nExamples:\n  grove keep-checkout demo~fix-login on\n  grove keep-checkout demo~fix-login default')
    .action(async (slug: string, setting: string, o: { json?: boolean }) => {
      const value = ({ on: true, off: false, default: null } as const)[setting as 'on' | 'off' | 'default'];
      if (value === undefined) throw new Exit(EXIT.usage, `setting must be on, off or default, not "${setting}"`);
      const { workspace } = await call(workspaceResponseSchema, 'PATCH', `/api/workspaces/${enc(slug)}`, { keepCheckoutOnClose: value });
      if (o.json) return out(JSON.stringify(workspace));
      const now = workspace.keepCheckoutOnClose;
      out(`${workspace.slug}: ${now === true ? 'the checkout stays' : now === false ? 'the checkout goes' : 'the project decides'} when its pull request is merged or closed`);
    });

  /** Open one workspace: start it (with progress) when it is stopped, wait when it is starting; print its URL. */
  async function resumeOne(slug: string, json: boolean): Promise<void> {
    let { workspace } = await call(workspaceResponseSchema, 'GET', `/api/workspaces/${enc(slug)}`);
    if (workspace.state === 'gone' || workspace.state === 'failed') {
      const why = workspace.state === 'gone' ? 'was torn down' : `failed to start${workspace.failureReason ? ` (${workspace.failureReason})` : ''}`;
      throw new ApiError(404, 'workspace_not_found', `workspace "${slug}" ${why}; its branch ${workspace.branch} is kept. Saved work comes back with: grove restore ${slug} --name <new-name>`);
    }
    if (workspace.state === 'tearing-down') throw new ApiError(409, 'invalid_state', `workspace "${slug}" is being torn down`);
    if (workspace.state !== 'running') {
      const after = await lastEventId(slug);
      const task = workspace.state === 'creating' ? untilRunning(slug) : call(workspaceResponseSchema, 'POST', `/api/workspaces/${enc(slug)}/start`).then((r) => r.workspace);
      workspace = await withProgress(slug, after, task, json);
    }
    if (json) return out(JSON.stringify({ ...workspace, url: workspaceUrl(env.url, workspace) }));
    err(`${workspace.slug}: ${workspace.state}`);
    out(workspaceUrl(env.url, workspace));
  }

  program
    .command('resume [slug]')
    .description('reopen a workspace (starting its sandbox if stopped) and print its URL; without a slug, pick one: most recent first, with state and last message')
    .option('--json', 'print JSON (the list without a slug, the workspace with one)')
    .option('-p, --project <project>', 'only this project')
    .addHelpText(
      'after',
      '\nIn a terminal, `grove resume` opens a picker: ↑/↓ or j/k move, a number + Enter chooses, Esc/q/Ctrl-C cancels (exit 130).\nOtherwise it prints the list and exits 0.\n\nExamples:\n  grove resume               # pick one\n  grove resume demo~fix-1    # reopen this one\n  grove resume --json | jq -r ".workspaces[0].slug"',
    )
    .action(async (slug: string | undefined, o: { json?: boolean; project?: string }) => {
      if (slug) return resumeOne(slug, Boolean(o.json));
      const q = o.project ? `?project=${enc(o.project)}` : '';
      const list = await call(listWorkspacesResponseSchema, 'GET', `/api/workspaces${q}`);
      const candidates = resumeCandidates(list.workspaces);
      const rows = await Promise.all(
        candidates.map(async (workspace) => ({
          workspace,
          // The quote is a nicety: a workspace whose thread cannot be read is listed without it.
          lastMessage: await call(lastMessageResponseSchema, 'GET', `/api/workspaces/${enc(workspace.slug)}/last-message`).then(
            (r) => r.lastMessage,
            (): LastMessage | null => null,
          ),
        })),
      );
      const now = Date.now();
      const { running, cap } = list.capacity;
      if (o.json || !process.stdin.isTTY || !process.stdout.isTTY) {
        if (o.json) return out(JSON.stringify({ workspaces: rows.map((r) => ({ ...r.workspace, lastMessage: r.lastMessage, url: workspaceUrl(env.url, r.workspace) })), capacity: list.capacity }));
        if (!rows.length) return out('No workspaces to resume. Fork one: grove fork <project> <name>');
        out(resumeTable(rows, now));
        return out(`\n${running} / ${cap} sandboxes running. Reopen one: grove resume <slug>`);
      }
      if (!rows.length) return out('No workspaces to resume. Fork one: grove fork <project> <name>');
      const width = process.stdout.columns || 80;
      const lines = table(rows.map((r) => [r.workspace.slug, r.workspace.state, ago(r.workspace.lastActivityAt, now), quote(r.lastMessage, Math.max(20, width - 60))])).split('\n');
      const chosen = await runPicker(`Resume a workspace (${running} / ${cap} sandboxes running):`, lines, { input: process.stdin, output: process.stdout });
      const pick = chosen === null ? undefined : rows[chosen];
      if (!pick) throw new Exit(EXIT.cancelled, 'cancelled');
      await resumeOne(pick.workspace.slug, false);
    });

  program
    .command('restore <slug>')
    .description("bring back a torn-down workspace's saved work (refs/grove/<slug>/teardown/<n>) as a new workspace")
    .option('--name <name>', 'name of the new workspace (default: <name>-restored)')
    .option('-n, --number <n>', 'which saved work (default: the newest; see --list)', positiveInt)
    .option('--list', 'only list the saved work of <slug>')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExamples:\n  grove restore demo~fix-1 --list\n  grove restore demo~fix-1 --name fix-1-again\n  grove restore demo~fix-1 -n 1 --name first-try')
    .action(async (slug: string, o: { name?: string; number?: number; list?: boolean; json?: boolean }) => {
      const { saved } = await call(savedWorkResponseSchema, 'GET', `/api/workspaces/${enc(slug)}/saved`);
      if (o.list) {
        if (o.json) return out(JSON.stringify({ saved }));
        if (!saved.length) return out(`No saved work for ${slug}.`);
        return out(table([['N', 'REF', 'COMMIT'], ...saved.map((s) => [String(s.n), s.ref, s.commit.slice(0, 12)])]));
      }
      const { project, name: oldName } = parseSlug(slug);
      if (!saved.length) {
        const branch = await call(workspaceResponseSchema, 'GET', `/api/workspaces/${enc(slug)}`).then(
          (r) => r.workspace.branch,
          () => null,
        );
        const way = branch ? `; its branch is kept: grove fork ${project} <name> --from ${branch}` : '';
        throw new ApiError(404, 'not_found', `no saved work for "${slug}" (nothing was left uncommitted when it was removed)${way}`);
      }
      const name = o.name ?? `${oldName}-restored`;
      const newSlug = makeSlug(project, name);
      const after = await lastEventId(newSlug).catch(() => 0);
      const accepted = await call(forkAcceptedResponseSchema, 'POST', `/api/workspaces/${enc(slug)}/restore?wait=false`, { name, ...(o.number ? { n: o.number } : {}) });
      const target = accepted.workspace.slug;
      printReady(await withProgress(target, after, untilRunning(target), Boolean(o.json)), Boolean(o.json));
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
      .addHelpText('after', `\nExample:\n  grove ${cmd} demo~fix-login`)
      .action(async (slug: string, o: { json?: boolean }) => {
        const { workspace } = await call(workspaceResponseSchema, method, `/api/workspaces/${enc(slug)}${suffix}`);
        printWorkspace(workspace, Boolean(o.json));
      });
  }

  program
    .command('logs <slug>')
    .description("print a workspace's audit trail")
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExamples:\n  grove logs demo~fix-login\n  grove logs demo --json | jq -r .type')
    .action(async (slug: string, o: { json?: boolean }) => {
      const { events } = await call(eventsResponseSchema, 'GET', `/api/events?slug=${enc(slug)}`);
      for (const e of events) out(o.json ? JSON.stringify(e) : `${e.at}  ${e.type}  ${JSON.stringify(e.data)}`);
    });

  const project = program.command('project').description('manage projects (repositories Grove forks workspaces from)');
  project
    .command('add <name> <source>')
    .description('add a project from a repository: an absolute path, a file://, https:// or ssh:// URL, or user@host:path (cloned bare under GROVE_HOME; no workspace is started)')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExamples:\n  grove project add app https://git.example.com/team/app.git\n  grove project add tools /srv/git/tools.git\n\nExit codes: 8 when the name is taken, 9 when the repository cannot be reached or refuses the credentials.')
    .action(async (name: string, source: string, o: { json?: boolean }) => {
      const { project: p } = await call(projectResponseSchema, 'POST', '/api/projects', { name, source });
      if (o.json) return out(JSON.stringify(p));
      out(`project ${p.name} added (default branch ${p.defaultBranch})`);
      err(`Fork a workspace of it: grove fork ${p.name} <name>`);
    });

  project
    .command('config <project>')
    .description("show a project's config (agent, allowedPaths, egress, git, forge, keepCheckoutOnClose, overlay) with its defaults, or change some keys")
    .option('--set <key=json>', 'set one key to a JSON value (repeatable)', (v: string, all: string[]) => [...all, v], [])
    .option('--unset <key>', 'remove one key, back to its default (repeatable)', (v: string, all: string[]) => [...all, v], [])
    .option('--json', 'print JSON on one line')
    .addHelpText(
      'after',
      "\nExamples:\n  grove project config app\n  grove project config app --set keepCheckoutOnClose=true\n  grove project config app --set 'allowedPaths=[\"src/**\"]' --unset forge\n\nOnly the keys named change; the rest stays as stored. Sandboxes created from now on use it. docs/agents.md has every key.",
    )
    .action(async (name: string, o: { set: string[]; unset: string[]; json?: boolean }) => {
      let r;
      if (o.set.length || o.unset.length) {
        let patch: Record<string, unknown>;
        try {
          patch = configPatch(o.set, o.unset);
        } catch (e) {
          if (e instanceof ConfigArgError) throw new Exit(EXIT.usage, e.message);
          throw e;
        }
        r = await call(projectConfigResponseSchema, 'PATCH', `/api/projects/${enc(name)}/config`, checked(projectConfigPatchSchema, patch));
        err(`${name}: ${[...o.set.map((s) => s.slice(0, s.indexOf('='))), ...o.unset].join(', ')} changed; sandboxes created from now on use it`);
      } else {
        r = await call(projectConfigResponseSchema, 'GET', `/api/projects/${enc(name)}/config`);
      }
      out(o.json ? JSON.stringify(r.config) : JSON.stringify(r.config, null, 2));
    });

  // The config-parity overlay: the user's local files (.env, .claude/settings.local.json, ...) that workspaces
  // get and that never enter a commit (docs/git-flow.md).
  const overlay = project.command('overlay').description("a project's overlay: local files its workspaces get that git does not carry (never committed)");
  const overlayTable = (files: OverlayFileInfo[], name: string): void => {
    if (!files.length) return out(`No overlay files for ${name}. Add one: grove project overlay set ${name} .env --from ./.env`);
    out(table([['PATH', 'IN THE SANDBOX', 'SIZE'], ...files.map((f) => [f.path, f.writable ? 'copied (writable)' : 'mounted read-only', `${f.size} B`])]));
  };
  overlay
    .command('ls <project>')
    .description("list a project's overlay files")
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExamples:\n  grove project overlay ls app\n  grove project overlay ls app --json | jq -r ".files[].path"')
    .action(async (name: string, o: { json?: boolean }) => {
      const r = await call(overlayListResponseSchema, 'GET', `/api/projects/${enc(name)}/overlay`);
      if (o.json) return out(JSON.stringify(r));
      overlayTable(r.files, name);
    });
  overlay
    .command('set <project> <path>')
    .description('add or replace an overlay file (a path in the checkout, e.g. .env); its content comes from --from or stdin. Workspaces forked or reopened from now on get it')
    .option('--from <file>', 'read the content from this local file (default: stdin)')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExamples:\n  grove project overlay set app .env --from ./.env\n  grove project overlay set app .claude/settings.local.json < ~/app/.claude/settings.local.json')
    .action(async (name: string, file: string, o: { from?: string; json?: boolean }) => {
      const content = o.from === undefined ? await readStdin() : readLocal(o.from);
      const body = checked(putOverlayFileRequestSchema, { path: file, content });
      const r = await call(overlayListResponseSchema, 'PUT', `/api/projects/${enc(name)}/overlay`, body);
      if (o.json) return out(JSON.stringify(r));
      err(`${name}: ${file} set (${Buffer.byteLength(content)} B); workspaces forked or reopened from now on get it`);
      overlayTable(r.files, name);
    });
  overlay
    .command('rm <project> <path>')
    .description('remove an overlay file; workspaces forked or reopened from now on no longer get it')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExamples:\n  grove project overlay rm app .env')
    .action(async (name: string, file: string, o: { json?: boolean }) => {
      const r = await call(overlayListResponseSchema, 'DELETE', `/api/projects/${enc(name)}/overlay?${new URLSearchParams({ path: file }).toString()}`);
      if (o.json) return out(JSON.stringify(r));
      err(`${name}: ${file} removed from the overlay`);
      overlayTable(r.files, name);
    });

  program
    .command('projects')
    .description('list projects')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExamples:\n  grove projects\n  grove projects --json | jq -r ".projects[].name"')
    .action(async (o: { json?: boolean }) => {
      const list = await call(listProjectsResponseSchema, 'GET', '/api/projects');
      if (o.json) return out(JSON.stringify(list));
      if (!list.projects.length) return out('No projects yet. Add one: grove project add <name> <source>');
      out(table([['NAME', 'DEFAULT BRANCH', 'ADDED'], ...list.projects.map((p) => [p.name, p.defaultBranch, p.createdAt])]));
    });

  program
    .command('checkpoint <slug>')
    .description("commit a workspace's changes on its branch, from the host (nothing to commit is not an error)")
    .option('-m, --message <text>', 'commit message (default: grove: checkpoint of <slug>)')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExamples:\n  grove checkpoint app~login-fix -m "Login: keep the session on reload"\n  grove checkpoint app~login-fix --json | jq -r .commit')
    .action(async (slug: string, o: { message?: string; json?: boolean }) => {
      const body = checked(checkpointRequestSchema, o.message === undefined ? {} : { message: o.message });
      const r = await call(checkpointResponseSchema, 'POST', `/api/workspaces/${enc(slug)}/checkpoint`, body);
      if (o.json) return out(JSON.stringify(r));
      if (!r.commit) return out(`nothing to checkpoint: ${r.branch} already holds everything in ${slug}`);
      out(`${r.branch}: ${r.commit.slice(0, 12)} (${r.files.length} ${r.files.length === 1 ? 'file' : 'files'})`);
    });

  program
    .command('diff <slug>')
    .description("what a workspace changed since it forked (its branch plus work not yet checkpointed), and where it stands against the default branch")
    .option('--stat', 'only the files with their +/- line counts')
    .option('--json', 'print JSON (files, ahead/behind, the patch)')
    .addHelpText('after', '\nExamples:\n  grove diff app~login-fix | less -R\n  grove diff app~login-fix --stat\n  grove diff app~login-fix --json | jq .ahead')
    .action(async (slug: string, o: { stat?: boolean; json?: boolean }) => {
      const d = await call(diffResponseSchema, 'GET', `/api/workspaces/${enc(slug)}/diff`);
      if (o.json) return out(JSON.stringify(d));
      // The summary goes to stderr so that `grove diff <slug> > x.patch` writes a patch git can apply.
      if (o.stat) {
        out(diffHeadline(d));
        return out(diffStat(d.files));
      }
      err(diffHeadline(d));
      if (d.patch) process.stdout.write(d.patch.endsWith('\n') ? d.patch : `${d.patch}\n`);
      if (d.truncated) err('grove: the patch was cut at 1 MiB; see the whole of it in the workspace');
    });

  program
    .command('publish <slug>')
    .description("checkpoint, push the workspace's branch to the project's remote and open (or update) its pull request")
    .option('--title <text>', 'pull request title (default: <name> (from Grove workspace <slug>))')
    .option('--body <text>', 'pull request description')
    .option('-m, --message <text>', 'commit message of the checkpoint taken first, if there is anything to commit')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nNeeds the project\'s forge (PUT /api/projects/<project>/config {forge}), GROVE_FORGE_TOKEN in the server\'s environment and a remote.\nExit codes: 7 not configured (says what is missing), 8 push rejected or nothing to publish, 9 remote or forge failed.\n\nExamples:\n  grove publish app~login-fix --title "Keep the session on reload"\n  grove publish app~login-fix --json | jq -r .pullRequest.url',
    )
    .action(async (slug: string, o: { title?: string; body?: string; message?: string; json?: boolean }) => {
      const body = checked(publishRequestSchema, { title: o.title, body: o.body, message: o.message });
      if (!o.json) err(`${slug}: checkpoint, push, pull request…`);
      const r = await call(publishResponseSchema, 'POST', `/api/workspaces/${enc(slug)}/publish`, body);
      if (o.json) return out(JSON.stringify(r));
      if (r.checkpoint.commit) err(`${slug}: checkpoint ${r.checkpoint.commit.slice(0, 12)}`);
      err(`${slug}: pushed ${r.pushed.branch} at ${r.pushed.commit.slice(0, 12)}`);
      out(`pull request #${r.pullRequest.number} (${r.pullRequest.state}): ${r.pullRequest.url}`);
    });

  return program;
}

export function exitCodeFor(e: unknown): number {
  if (e instanceof Exit) return e.code;
  if (e instanceof CommanderError) return e.exitCode === 0 ? EXIT.ok : EXIT.usage;
  if (e instanceof ApiError) {
    if (e.code === 'unreachable') return EXIT.unreachable;
    if (e.status === 401) return EXIT.unauthorized;
    if (e.status === 404) return EXIT.notFound;
    if (e.status === 429) return EXIT.capacity;
    if (e.status === 422) return EXIT.usage;
    if (e.code === 'not_configured') return EXIT.notConfigured;
    if (e.status === 409) return EXIT.conflict;
    if (e.code === 'remote_failed' || e.code === 'forge_failed') return EXIT.remote;
  }
  return EXIT.error;
}

export async function run(argv: string[]): Promise<number> {
  try {
    await buildProgram().parseAsync(argv, { from: 'user' });
    return EXIT.ok;
  } catch (e) {
    const silent = e instanceof CommanderError || (e instanceof Exit && !e.message);
    if (!silent) err(`grove: ${e instanceof Error ? e.message : String(e)}`);
    return exitCodeFor(e);
  }
}
