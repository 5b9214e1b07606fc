// The real `grove` binary against a real server.
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { diffResponseSchema, listProjectsResponseSchema, listWorkspacesResponseSchema, publishResponseSchema, type LastMessage, type ThreadLine, type Workspace } from '@grove/contracts';
import { startTestForge, type TestForge } from '../packages/core/src/test-support/test-forge.ts';
import { TOKEN, cleanup, containerOf, dockerExec, git, makeHome, makeUpstream, useServer, waitFor } from './harness.ts';

const FORGE_TOKEN = 'e2e-cli-forge-token-93be04aa';
const fx = useServer('cli', { GROVE_MAX_RUNNING: '2', GROVE_FORGE_TOKEN: FORGE_TOKEN });

const exec = promisify(execFile);
const bin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../apps/cli/bin/grove.mjs');

type Result = { code: number; stdout: string; stderr: string };

async function run(args: string[], env: NodeJS.ProcessEnv, cwd?: string): Promise<Result> {
  try {
    const r = await exec(process.execPath, [bin, ...args], { env, cwd });
    return { code: 0, ...r };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

function grove(...args: string[]): Promise<Result> {
  return run(args, { ...process.env, GROVE_URL: fx.s.base, GROVE_TOKEN: TOKEN });
}

/**
 * Run `grove <args>` in a real pseudo-terminal (util-linux `script`), then `stty -a` in the same terminal
 * to show how the CLI left it. `keys` writes to the terminal once `ready` appears in its output.
 */
async function groveInTerminal(args: string[], ready: string, keys: string): Promise<{ code: number; output: string }> {
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const cmd = `${[process.execPath, bin, ...args].map(q).join(' ')}; echo "grove-exit=$?"; stty -a`;
  const child = spawn('script', ['-qfec', cmd, '/dev/null'], {
    env: { ...process.env, GROVE_URL: fx.s.base, GROVE_TOKEN: TOKEN, TERM: 'xterm' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await waitFor(`"${ready}" in the terminal`, async () => output.includes(ready), 30_000);
  child.stdin.write(keys);
  await exited;
  child.stdin.end();
  const code = /grove-exit=(\d+)/.exec(output)?.[1];
  return { code: code === undefined ? -1 : Number(code), output };
}

async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const { port } = srv.address() as AddressInfo;
  await new Promise((r) => srv.close(r));
  return port;
}

type ResumeJson = { workspaces: Array<Workspace & { lastMessage: LastMessage | null; url: string }> };
const stateOf = async (slug: string) => (await fx.s.api<{ workspace: Workspace }>('GET', `/api/workspaces/${slug}`)).body.workspace.state;

describe('grove CLI', () => {
  it('forks with progress, lists as a table and as JSON, stops and removes', async () => {
    const fork = await grove('fork', 'demo', 'cli-a');
    expect(fork.code).toBe(0);
    expect(fork.stdout).toContain('demo~cli-a: running');
    expect(fork.stderr).toContain('worktree ready');
    expect(fork.stderr).toContain('ready');
    expect(fork.stdout).toContain(`${fx.s.base}/p/demo/w/cli-a`);

    const ls = await grove('ls');
    expect(ls.stdout).toMatch(/demo~cli-a\s+running\s+grove\/cli-a\s+-\s+just now$/m);
    expect(ls.stdout).toContain('2 / 2 sandboxes running');

    const json = await grove('ls', '--json');
    const parsed = listWorkspacesResponseSchema.parse(JSON.parse(json.stdout));
    expect(parsed.capacity).toEqual({ running: 2, creating: 0, cap: 2, queued: 0 });

    const full = await grove('fork', 'demo', 'cli-b');
    expect(full.code).toBe(4);
    expect(full.stderr).toMatch(/sandbox slots are in use/);

    // -f: the trail so far, then what happens next (here the stop), until it is interrupted.
    const follow = spawn(process.execPath, [bin, 'logs', 'demo~cli-a', '-n', '1', '-f'], { env: { ...process.env, GROVE_URL: fx.s.base, GROVE_TOKEN: TOKEN } });
    let followed = '';
    follow.stdout.on('data', (d: Buffer) => (followed += d.toString()));
    const printed = (re: RegExp) => waitFor(`grove logs -f printed ${re}`, async () => re.test(followed), 20_000);
    try {
      await printed(/^\S+ {2}\S+ {2}\{/m);
      expect(followed).not.toContain('workspace.stopped');
      expect((await grove('stop', 'demo~cli-a')).stdout).toContain('stopped');
      await printed(/ {2}workspace\.stopped {2}/);
      expect(followed.trim().split('\n').filter((l) => l.includes('workspace.stopped'))).toHaveLength(1);
    } finally {
      follow.kill('SIGINT');
    }
    const logs = await grove('logs', 'demo~cli-a');
    expect(logs.stdout).toContain('workspace.stopped');
    // -n: the newest events only; the stop is the last thing that happened to it.
    const newest = (await grove('logs', 'demo~cli-a', '-n', '1')).stdout.trim().split('\n');
    expect(newest).toHaveLength(1);
    expect(newest[0]).toMatch(/^\S+ {2}workspace\.stopped {2}\{/);
    expect((await grove('rm', 'demo~cli-a')).stdout).toContain('gone');
  });

  it('exits with codes scripts can rely on', async () => {
    expect((await grove('stop', 'demo~missing')).code).toBe(3);
    expect((await grove('fork', 'demo', 'Bad/Name')).code).toBe(2);
    expect((await grove('nonsense')).code).toBe(2);
    const help = await grove('--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Exit codes');
    const denied = await exec(process.execPath, [bin, 'ls'], { env: { ...process.env, GROVE_URL: fx.s.base, GROVE_TOKEN: 'wrong-token-wrong-token' } }).catch((e: { code: number }) => e);
    expect((denied as { code: number }).code).toBe(6);
  });

  it('fork -m hands the first message to the agent once the workspace is ready; a bad message creates nothing', async () => {
    const empty = await grove('fork', 'demo', 'cli-m0', '-m', '');
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('-m: text must not be empty');
    expect((await fx.s.api('GET', '/api/workspaces/demo~cli-m0')).status).toBe(404);

    const fork = await grove('fork', 'demo', 'cli-m', '-m', 'hello from the command line');
    expect(fork.code).toBe(0);
    expect(fork.stdout).toContain('demo~cli-m: running');
    expect(fork.stderr).toMatch(/message sent \(turn [^)]+\)/);
    const said = await waitFor('the message in the thread', async () => {
      const r = await fx.s.api<{ lines: ThreadLine[] }>('GET', '/w/demo~cli-m/thread');
      return r.body.lines.find((l) => l.kind === 'user');
    });
    expect(said).toMatchObject({ kind: 'user', text: 'hello from the command line' });
    expect((await grove('rm', 'demo~cli-m')).code).toBe(0);
  });

  it('send hands a message over and prints the reply when the turn ends, reopening a stopped workspace; escapes never reach the terminal', async () => {
    expect((await grove('fork', 'demo', 'cli-send')).code).toBe(0);
    const hello = await grove('send', 'demo~cli-send', 'hello', 'from', 'the', 'cli');
    expect(hello.code, hello.stderr).toBe(0);
    expect(hello.stdout).toBe('Scripted agent here. You said: "hello from the cli". (turn 1)\n');
    expect(hello.stderr).toContain('demo~cli-send: message sent (turn-1), waiting for the reply…');

    // The scripted agent says back what it is sent: a reply holding a window-title and a clipboard sequence is
    // printed with its control characters as spaces.
    const hostile = await grove('send', 'demo~cli-send', 'x\u001b]0;pwned\u0007 \u001b]52;c;cHduZWQ=\u0007 \u001b[2J');
    expect(hostile.code, hostile.stderr).toBe(0);
    expect(hostile.stdout).toContain('pwned');
    expect([...hostile.stdout].filter((c) => c !== '\n' && (c.charCodeAt(0) < 0x20 || (c.charCodeAt(0) >= 0x7f && c.charCodeAt(0) <= 0x9f)))).toEqual([]);

    const failed = await grove('send', 'demo~cli-send', 'fail');
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('grove: the turn failed: Scripted failure');

    // Stopped: send starts it first (with progress), and the agent picks up the same thread.
    expect((await grove('stop', 'demo~cli-send')).code).toBe(0);
    const reopened = await grove('send', 'demo~cli-send', 'hello again', '--json');
    expect(reopened.code, reopened.stderr).toBe(0);
    const answer = JSON.parse(reopened.stdout) as { turn: string; outcome: string; error: string | null; reply: LastMessage[] };
    expect(answer).toMatchObject({ turn: 'turn-4', outcome: 'completed', error: null });
    expect(answer.reply.map((m) => [m.who, m.text])).toEqual([['agent', 'Scripted agent here. You said: "hello again". (turn 4)']]);
    expect(await stateOf('demo~cli-send')).toBe('running');

    // --no-wait prints the turn at once; while that reply runs, another message is refused (exit 8), not queued.
    const slow = await grove('send', 'demo~cli-send', 'sleep 4000', '--no-wait');
    expect(slow.code).toBe(0);
    expect(slow.stdout).toBe('turn-5\n');
    const busy = await grove('send', 'demo~cli-send', 'are you there?');
    expect(busy.code).toBe(8);
    expect(busy.stderr).toContain('a turn is already running');
    // --queue waits for that reply to end, then sends, and prints its own reply.
    const queued = await grove('send', 'demo~cli-send', 'after that', '--queue');
    expect(queued.code, queued.stderr).toBe(0);
    expect(queued.stderr).toContain('demo~cli-send: another reply is running; the message goes out when it ends…');
    expect(queued.stdout).toBe('Scripted agent here. You said: "after that". (turn 6)\n');

    // "-" reads the message from stdin; bad input is refused before anything is sent.
    expect((await fx.s.api<{ events: unknown[] }>('GET', '/api/events?slug=demo~cli-send&type=turn.ended')).body.events).toHaveLength(6);
    const piped = await new Promise<Result>((resolve) => {
      const child = execFile(process.execPath, [bin, 'send', 'demo~cli-send', '-'], { env: { ...process.env, GROVE_URL: fx.s.base, GROVE_TOKEN: TOKEN } }, (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
      child.stdin?.end('from\nstdin\n');
    });
    expect(piped.code, piped.stderr).toBe(0);
    expect(piped.stdout).toContain('You said: "from\nstdin". (turn 7)');
    expect((await grove('send', 'demo~cli-send', ' ')).code).toBe(2);
    expect((await grove('send', 'demo~nope', 'hi')).code).toBe(3);
    expect((await grove('rm', 'demo~cli-send')).code).toBe(0);
  }, 120_000);

  it('fork --pr falls back to the default branch with the reason recorded; keep-checkout sets and resets the per-workspace choice', async () => {
    expect((await grove('fork', 'demo', 'cli-x', '--from', 'main', '--pr', '7')).code).toBe(2);
    // The demo's remote has no refs/pull/7/head: the fork starts at the default branch and says why.
    const fork = await grove('fork', 'demo', 'cli-pr', '--pr', '7', '--keep-checkout');
    expect(fork.code).toBe(0);
    const fallback = await fx.s.api<{ events: { data: { wanted?: string; base?: string } }[] }>('GET', '/api/events?slug=demo~cli-pr&type=workspace.base_fallback');
    expect(fallback.body.events[0]?.data).toMatchObject({ wanted: 'pull request #7', base: 'main' });
    const ws = async () => (await fx.s.api<{ workspace: Workspace }>('GET', '/api/workspaces/demo~cli-pr')).body.workspace;
    expect((await ws()).keepCheckoutOnClose).toBe(true);

    const off = await grove('keep-checkout', 'demo~cli-pr', 'off');
    expect(off.stdout).toContain('the checkout goes');
    expect((await ws()).keepCheckoutOnClose).toBe(false);
    expect((await grove('keep-checkout', 'demo~cli-pr', 'default')).stdout).toContain('the project decides');
    expect((await ws()).keepCheckoutOnClose ?? null).toBeNull();
    expect((await grove('keep-checkout', 'demo~cli-pr', 'maybe')).code).toBe(2);
    expect((await grove('keep-checkout', 'demo~nope', 'on')).code).toBe(3);
    expect((await grove('rm', 'demo~cli-pr')).code).toBe(0);
  });

  it('resume lists without a terminal (table, JSON with the last message), reopens a stopped workspace by slug, exits 3 and 4', async () => {
    expect((await grove('fork', 'demo', 'cli-r')).code).toBe(0);
    expect((await fx.s.api('POST', '/w/demo~cli-r/messages', { text: 'remember the resume test' })).status).toBe(202);
    await waitFor('the reply', async () => (await fx.s.api<{ lines: ThreadLine[] }>('GET', '/w/demo~cli-r/thread')).body.lines.some((l) => l.kind === 'turn_end'));
    expect((await grove('stop', 'demo~cli-r')).code).toBe(0);

    const list = await grove('resume');
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/^#\s+SLUG\s+STATE\s+LAST ACTIVITY\s+LAST MESSAGE$/m);
    // The last message of a stopped workspace, read by the registry (its backend is not running).
    expect(list.stdout).toMatch(/demo~cli-r\s+stopped\s+.*agent: Scripted agent here\./);
    expect(list.stdout).toMatch(/\bdemo\s+running/);
    expect(list.stdout).not.toContain('demo~cli-a');
    expect(list.stdout).toContain('1 / 2 sandboxes running');

    const json = await grove('resume', '--json');
    expect(json.code).toBe(0);
    const parsed = JSON.parse(json.stdout) as ResumeJson;
    const r = parsed.workspaces.find((w) => w.slug === 'demo~cli-r');
    expect(r?.state).toBe('stopped');
    expect(r?.lastMessage?.who).toBe('agent');
    expect(r?.lastMessage?.text).toContain('You said: "remember the resume test"');
    expect(r?.url).toBe(`${fx.s.base}/p/demo/w/cli-r`);

    const resumed = await grove('resume', 'demo~cli-r');
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout.trim()).toBe(`${fx.s.base}/p/demo/w/cli-r`);
    expect(resumed.stderr).toContain('demo~cli-r: slot reserved');
    expect(resumed.stderr).toContain('demo~cli-r: ready');
    expect(await stateOf('demo~cli-r')).toBe('running');
    const thread = await fx.s.api<{ lines: ThreadLine[] }>('GET', '/w/demo~cli-r/thread');
    expect(thread.body.lines.some((l) => l.kind === 'user' && l.text === 'remember the resume test')).toBe(true);

    expect((await grove('resume', 'demo~nope')).code).toBe(3);
    expect((await grove('stop', 'demo~cli-r')).code).toBe(0);
    expect((await grove('fork', 'demo', 'cli-s')).code).toBe(0);
    // demo and cli-s hold both slots.
    const full = await grove('resume', 'demo~cli-r');
    expect(full.code).toBe(4);
    expect(full.stderr).toMatch(/sandbox slots are in use/);
    expect(await stateOf('demo~cli-r')).toBe('stopped');
  });

  it('resume in a terminal: a picker, the second entry chosen with the arrow key, started, the terminal given back; Esc cancels', async () => {
    expect((await grove('stop', 'demo~cli-s')).code).toBe(0);
    const order = (JSON.parse((await grove('resume', '--json')).stdout) as ResumeJson).workspaces;
    expect(order.map((w) => w.slug).sort()).toEqual(['demo', 'demo~cli-r', 'demo~cli-s']);
    const second = order[1];
    if (!second) throw new Error('no second entry');
    // Most recent activity first: cli-s (forked last), then cli-r (started in the test before), then demo.
    expect(second).toMatchObject({ slug: 'demo~cli-r', state: 'stopped' });

    const cancelled = await groveInTerminal(['resume'], 'number + Enter choose', '\x1b');
    expect(cancelled.code).toBe(130);
    expect(cancelled.output).not.toContain('/p/demo/w/');

    const picked = await groveInTerminal(['resume'], 'number + Enter choose', '\x1b[B\r');
    expect(picked.code, picked.output).toBe(0);
    expect(picked.output).toContain('Resume a workspace (1 / 2 sandboxes running)');
    for (const w of order) expect(picked.output).toContain(w.slug);
    expect(picked.output).toContain(second.url);
    expect(await stateOf(second.slug)).toBe('running');
    for (const run of [cancelled, picked]) {
      // The cursor is shown again and the terminal is back in cooked mode with echo.
      expect(run.output.lastIndexOf('\x1b[?25h')).toBeGreaterThan(run.output.lastIndexOf('\x1b[?25l'));
      expect(run.output).toMatch(/(^|\s)icanon(\s|$)/m);
      expect(run.output).toMatch(/(^|\s)echo(\s|$)/m);
    }
    expect((await grove('stop', second.slug)).code).toBe(0);
  });

  it('restore brings back the uncommitted work of a torn-down workspace as a new one', async () => {
    const file = 'notes-from-the-cli-test.txt';
    const content = `kept across teardown ${'\u00e9'.repeat(3)}\n`;
    fs.writeFileSync(path.join(fx.home, 'worktrees', 'demo', 'cli-s', file), content);
    expect((await grove('rm', 'demo~cli-s')).stdout).toContain('gone');

    const listed = await grove('restore', 'demo~cli-s', '--list');
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/^1\s+refs\/grove\/demo\+cli-s\/teardown\/1\s+[0-9a-f]{12}$/m);

    const restored = await grove('restore', 'demo~cli-s', '--name', 'cli-s2');
    expect(restored.code, restored.stderr).toBe(0);
    expect(restored.stdout).toContain('demo~cli-s2: running');
    expect(restored.stdout).toContain(`${fx.s.base}/p/demo/w/cli-s2`);
    expect(restored.stderr).toContain('demo~cli-s2: ready');
    expect(fs.readFileSync(path.join(fx.home, 'worktrees', 'demo', 'cli-s2', file), 'utf8')).toBe(content);

    const none = await grove('restore', 'demo~cli-r');
    expect(none.code).toBe(3);
    expect(none.stderr).toMatch(/no saved work for "demo~cli-r".*--from grove\/cli-r/);
    expect((await grove('restore', 'demo~cli-s', '-n', '0')).code).toBe(2);
  });

  it('up starts a server from the clone (not the cwd) that answers with a working sign-in link; down stops it', async () => {
    const home = makeHome('cli-up');
    const url = `http://127.0.0.1:${await freePort()}`;
    const { GROVE_TOKEN: _unused, ...inherited } = process.env;
    const env = { ...inherited, GROVE_HOME: home, GROVE_URL: url, GROVE_DEMO: '0', GROVE_WEB_DIR: path.join(home, 'no-web'), GROVE_MAX_RUNNING: '1', GROVE_PREVIEW_PORT: '0' };
    let pid: number | undefined;
    try {
      const up = await run(['up', '--no-setup', '--json'], env, os.tmpdir());
      expect(up.code, up.stderr).toBe(0);
      const info = JSON.parse(up.stdout) as { url: string; login: string; pid: number; log: string; started: boolean };
      pid = info.pid;
      expect(info).toMatchObject({ url, started: true, log: path.join(home, 'logs', 'server.log') });
      expect(fs.readFileSync(path.join(home, 'grove.pid'), 'utf8').trim()).toBe(String(info.pid));
      expect((await fetch(`${url}/api/health`)).status).toBe(200);
      const token = fs.readFileSync(path.join(home, 'token'), 'utf8').trim();
      expect(info.login).toBe(`${url}/login?token=${token}`);
      expect((await fetch(info.login, { redirect: 'manual' })).status).toBe(303);
      expect((await fetch(`${url}/api/workspaces`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);

      const again = await run(['up', '--no-setup'], env);
      expect(again.code).toBe(0);
      expect(again.stdout).toContain(`Grove is already running at ${url} (pid ${pid})`);

      const down = await run(['down'], env);
      expect(down.code, down.stderr).toBe(0);
      expect(down.stdout).toContain(`Grove stopped (pid ${pid})`);
      await expect(fetch(`${url}/api/health`)).rejects.toThrow();
      expect(fs.existsSync(path.join(home, 'grove.pid'))).toBe(false);
      expect(fs.readFileSync(info.log, 'utf8')).toContain('grove.shutdown');
      pid = undefined;
      expect((await run(['down'], env)).stdout).toContain('Grove is not running');
    } finally {
      if (pid) process.kill(pid, 'SIGKILL');
      cleanup(home);
    }
  });

  it('has help with an example on every command', async () => {
    for (const cmd of ['up', 'down', 'ls', 'fork', 'send', 'resume', 'restore', 'stop', 'start', 'rm', 'logs', 'project add', 'project overlay ls', 'project overlay set', 'project overlay rm', 'projects', 'checkpoint', 'diff', 'publish']) {
      const help = await grove(...cmd.split(' '), '--help');
      expect(help.code).toBe(0);
      expect(help.stdout).toContain(`grove ${cmd}`);
      expect(help.stdout, cmd).toMatch(/Examples?:\n {2}\S*grove /);
    }
  });
});

describe('grove and a project from a repository: project add, projects, diff, checkpoint, publish, the PR in ls', () => {
  const remoteHome = makeHome('cli-remote');
  const upstream = path.join(remoteHome, 'upstream.git');
  let forge: TestForge;

  beforeAll(async () => {
    makeUpstream(remoteHome, { 'README.md': '# app\n' });
    forge = await startTestForge({ bare: upstream, owner: 'team', repo: 'app', token: FORGE_TOKEN });
    // A slot for the fork below: the tests above leave workspaces running.
    const { workspaces } = listWorkspacesResponseSchema.parse((await fx.s.api('GET', '/api/workspaces')).body);
    for (const w of workspaces) if (!w.isDefault && w.state === 'running') expect((await fx.s.api('POST', `/api/workspaces/${w.slug}/stop`)).status).toBe(200);
  });

  afterAll(async () => {
    await forge?.close();
    fs.rmSync(remoteHome, { recursive: true, force: true });
  });

  it('adds and lists a project, shows the diff, checkpoints, explains what publish lacks, publishes; exit codes 2, 7, 8', async () => {
    const added = await grove('project', 'add', 'app', `file://${upstream}`);
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout.trim()).toBe('project app added (default branch main)');
    expect(added.stderr).toContain('grove send app "<message>"');
    const again = await grove('project', 'add', 'app', `file://${upstream}`);
    expect(again.code).toBe(8);
    expect(again.stderr).toMatch(/app/);
    expect((await grove('project', 'add', 'evil', 'ext::sh -c touch% /tmp/x')).code).toBe(2);

    const projects = await grove('projects');
    expect(projects.stdout).toMatch(/^app\s+main\s+\S+$/m);
    expect(listProjectsResponseSchema.parse(JSON.parse((await grove('projects', '--json')).stdout)).projects.map((p) => p.name)).toContain('app');

    // The project's config: shown with its defaults, changed key by key.
    const shown = await grove('project', 'config', 'app');
    expect(shown.code, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout)).toEqual({});
    const changed = await grove('project', 'config', 'app', '--set', 'keepCheckoutOnClose=true', '--set', 'allowedPaths=["src/**"]');
    expect(changed.code, changed.stderr).toBe(0);
    expect(changed.stderr).toContain('keepCheckoutOnClose, allowedPaths changed');
    expect(JSON.parse(changed.stdout)).toEqual({ keepCheckoutOnClose: true, allowedPaths: ['src/**'] });
    const unset = await grove('project', 'config', 'app', '--unset', 'allowedPaths', '--json');
    expect(JSON.parse(unset.stdout)).toEqual({ keepCheckoutOnClose: true });
    const notJson = await grove('project', 'config', 'app', '--set', 'allowedPaths=src/**');
    expect([notJson.code, notJson.stderr]).toEqual([2, expect.stringContaining('the value is not JSON')]);
    const unknown = await grove('project', 'config', 'app', '--set', 'keep=true');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('keep');
    expect((await fx.s.api<{ config: unknown }>('GET', '/api/projects/app/config')).body.config).toEqual({ keepCheckoutOnClose: true });
    expect((await grove('project', 'config', 'app', '--unset', 'keepCheckoutOnClose')).code).toBe(0);

    // The overlay: a local file workspaces get and commits never carry.
    expect((await grove('project', 'overlay', 'ls', 'app')).stdout).toContain('No overlay files for app.');
    const local = path.join(remoteHome, 'local.env');
    fs.writeFileSync(local, 'TOKEN=from-the-cli\n');
    const set = await grove('project', 'overlay', 'set', 'app', '.env', '--from', local);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toMatch(/^\.env\s+copied \(writable\)|^\.env\s+mounted read-only/m);
    expect(set.stdout).toMatch(/^\.env\s+.*\s19 B$/m);
    expect((await grove('project', 'overlay', 'set', 'app', '.git/config', '--from', local)).code).toBe(2);
    const missing = await grove('project', 'overlay', 'set', 'app', '.envrc', '--from', path.join(remoteHome, 'nope'));
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no such file');
    expect((await fx.s.api<{ files: { path: string }[] }>('GET', '/api/projects/app/overlay')).body.files.map((f) => f.path)).toEqual(['.env']);

    const fork = await grove('fork', 'app', 'feat');
    expect(fork.code, fork.stderr).toBe(0);
    // Inside the sandbox (on the host the worktree holds only the mount point).
    expect(dockerExec(containerOf(fx.s.instance, 'app~feat') ?? '', ['cat', '/workspace/.env'])).toEqual({ code: 0, out: 'TOKEN=from-the-cli\n' });
    const rm = await grove('project', 'overlay', 'rm', 'app', '.env');
    expect(rm.code, rm.stderr).toBe(0);
    expect(rm.stdout).toContain('No overlay files for app.');
    fs.writeFileSync(path.join(fx.home, 'worktrees', 'app', 'feat', 'hello.txt'), 'hello from the cli test\n');

    const stat = await grove('diff', 'app~feat', '--stat');
    expect(stat.code, stat.stderr).toBe(0);
    expect(stat.stdout).toContain('grove/feat: 0 commits ahead of main, 0 commits behind; 1 file changed (some not checkpointed yet)');
    expect(stat.stdout).toMatch(/^A\s+\+1\s+-0\s+hello\.txt$/m);
    const patch = await grove('diff', 'app~feat');
    expect(patch.stdout).toContain('+hello from the cli test');
    // The summary is on stderr: stdout is a patch git can apply.
    expect(patch.stdout.startsWith('diff --git a/hello.txt b/hello.txt')).toBe(true);
    expect(patch.stderr).toContain('1 file changed');
    expect(diffResponseSchema.parse(JSON.parse((await grove('diff', 'app~feat', '--json')).stdout))).toMatchObject({ uncommitted: true, ahead: 0 });

    // No forge in the project config: exit 7 and what to add.
    const unconfigured = await grove('publish', 'app~feat');
    expect(unconfigured.code).toBe(7);
    expect(unconfigured.stderr).toMatch(/no forge.*PUT \/api\/projects\/app\/config/);
    expect(forge.pulls).toEqual([]);

    const cp = await grove('checkpoint', 'app~feat', '-m', 'Say hello');
    expect(cp.code, cp.stderr).toBe(0);
    expect(cp.stdout).toMatch(/^grove\/feat: [0-9a-f]{12} \(1 file\)$/m);
    expect(git(path.join(fx.home, 'repos', 'app'), 'log', '-1', '--format=%s', 'grove/feat')).toBe('Say hello');
    expect((await grove('checkpoint', 'app~feat')).stdout).toContain('nothing to checkpoint');
    expect((await grove('checkpoint', 'app~feat', '-m', '')).code).toBe(2);
    expect((await grove('diff', 'app~feat', '--stat')).stdout).toContain('grove/feat: 1 commit ahead of main, 0 commits behind; 1 file changed\n');

    expect((await fx.s.api('PUT', '/api/projects/app/config', { forge: { kind: 'gitea', baseUrl: forge.baseUrl, owner: 'team', repo: 'app' } })).status).toBe(200);
    const pub = await grove('publish', 'app~feat', '--title', 'Say hello', '--body', 'From the command line', '--json');
    expect(pub.code, pub.stderr).toBe(0);
    expect(publishResponseSchema.parse(JSON.parse(pub.stdout)).pullRequest).toMatchObject({ number: 1, state: 'open' });
    expect(forge.pulls.map((p) => [p.head, p.base, p.title, p.body])).toEqual([['grove/feat', 'main', 'Say hello', 'From the command line']]);
    expect((await grove('ls')).stdout).toMatch(/^app~feat\s+running\s+grove\/feat\s+#1 open\s/m);
    expect((await grove('ls')).stdout).toMatch(/^SLUG\s+STATE\s+BRANCH\s+PR\s+LAST ACTIVITY$/m);

    // Someone else pushed to the branch: the push is refused (exit 8), nothing is overwritten.
    const theirs = git(upstream, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit-tree', 'grove/feat^{tree}', '-p', 'grove/feat', '-m', 'theirs');
    git(upstream, 'update-ref', 'refs/heads/grove/feat', theirs);
    fs.writeFileSync(path.join(fx.home, 'worktrees', 'app', 'feat', 'more.txt'), 'more\n');
    const rejected = await grove('publish', 'app~feat');
    expect(rejected.code, rejected.stderr).toBe(8);
    expect(rejected.stderr).toMatch(/pushing grove\/feat failed/);
    expect(git(upstream, 'rev-parse', 'refs/heads/grove/feat')).toBe(theirs);
    expect((await grove('rm', 'app~feat')).code).toBe(0);

    // The project's conversation begins with its first message: its default workspace, started (with progress) and
    // answering, on the project's own branch; an unknown project is not found.
    expect((await fx.s.api('GET', '/api/workspaces/app')).status).toBe(404);
    const nothing = await grove('resume', 'app');
    expect([nothing.code, nothing.stderr]).toEqual([3, expect.stringContaining('app has no conversation to reopen yet; begin it with: grove send app')]);
    const first = await grove('send', 'app', 'hello, app');
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toBe('Scripted agent here. You said: "hello, app". (turn 1)\n');
    expect(first.stderr).toContain('app: ready');
    expect((await fx.s.api<{ workspace: Workspace }>('GET', '/api/workspaces/app')).body.workspace).toMatchObject({ isDefault: true, state: 'running', branch: 'grove/default' });
    expect((await grove('send', 'app', 'and again')).stdout).toContain('(turn 2)');
    expect((await grove('send', 'nope', 'hi')).code).toBe(3);
    expect((await grove('rm', 'app')).code).toBe(0);
  }, 180_000); // about 25 CLI runs, each a tsx start (~1 s of CPU): 35-42 s alone, over the 60 s default on a loaded 2-core machine
});
