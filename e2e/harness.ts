// Starts the real Grove server (real Docker, real git, real SQLite unless a test sets DATABASE_URL) in a child process for e2e tests.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll } from 'vitest';
import { WebSocket } from 'ws';
import type { StreamFrame, Workspace } from '@grove/contracts';
import { containerName } from '../packages/sandbox/src/docker.ts';
import { agentExecArgs, testRuntime } from '../packages/sandbox/src/test-support.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const TOKEN = 'e2e-token-0123456789abcdef';
/**
 * The sandboxes' runtime for this run: `npm test` runs the isolation and egress e2e files a second time with
 * GROVE_TEST_RUNTIME=runsc (gVisor). The server gets it as GROVE_RUNTIME; a GROVE_RUNTIME of the caller's shell never leaks in.
 */
export const TEST_RUNTIME = testRuntime(process.env.GROVE_TEST_RUNTIME);

export interface RunningServer {
  base: string;
  /** The preview listener (its own origin): http://127.0.0.1:<GROVE_PREVIEW_PORT>. */
  previewBase: string;
  home: string;
  instance: string;
  child: ChildProcess;
  logs: string[];
  api<T = unknown>(method: string, p: string, body?: unknown): Promise<{ status: number; body: T }>;
  /** SIGTERM and wait for exit. */
  stop(): Promise<void>;
  /** SIGKILL and wait for exit. */
  kill(): Promise<void>;
}

export function makeHome(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `grove-e2e-${prefix}-`));
}

export function instanceOf(home: string): string {
  return crypto.createHash('sha256').update(path.resolve(home)).digest('hex').slice(0, 8);
}

export async function startServer(opts: { home: string; env?: Record<string, string> }): Promise<RunningServer> {
  const logs: string[] = [];
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'apps/server/src/main.ts')], {
    cwd: root,
    env: {
      ...process.env,
      GROVE_HOME: opts.home,
      GROVE_PORT: '0',
      // Ephemeral even when a test fixes GROVE_PORT (a restart on the same port): GROVE_PORT + 1 may be taken.
      GROVE_PREVIEW_PORT: '0',
      GROVE_TOKEN: TOKEN,
      GROVE_MAX_RUNNING: '4',
      // No warm sandboxes unless a test asks (e2e/pool.test.ts): they would add a sandbox to every test's load.
      GROVE_WARM_POOL: '0',
      GROVE_WEB_DIR: path.join(opts.home, 'no-web'),
      LOG_LEVEL: 'info',
      GROVE_RUNTIME: TEST_RUNTIME,
      // SQLite in the test's home unless the test names a database: a DATABASE_URL of the caller's shell never leaks in.
      DATABASE_URL: '',
      ...opts.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let buf = '';
  const { port, previewPort } = await new Promise<{ port: number; previewPort: number }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${logs.join('\n')}`)), 90_000);
    child.stdout?.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        logs.push(line);
        try {
          const j = JSON.parse(line) as { msg?: string; port?: number; previewPort?: number };
          if (j.msg === 'grove.listening' && j.port && j.previewPort) {
            clearTimeout(timer);
            resolve({ port: j.port, previewPort: j.previewPort });
          }
        } catch {
          // not a log line
        }
      }
    });
    child.stderr?.on('data', (d: Buffer) => logs.push(d.toString()));
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${logs.join('\n')}`));
    });
  });
  const base = `http://127.0.0.1:${port}`;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const end = async (signal: NodeJS.Signals) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill(signal);
    await exited;
  };
  return {
    base,
    previewBase: `http://127.0.0.1:${previewPort}`,
    home: opts.home,
    instance: instanceOf(opts.home),
    child,
    logs,
    async api<T>(method: string, p: string, body?: unknown) {
      const r = await fetch(`${base}${p}`, {
        method,
        headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await r.text();
      return { status: r.status, body: (text ? JSON.parse(text) : undefined) as T };
    },
    stop: () => end('SIGTERM'),
    kill: () => end('SIGKILL'),
  };
}

/** Wait until the demo project's default workspace is running (the server starts it in the background). */
export async function waitFor<T>(what: string, fn: () => Promise<T | undefined | null | false>, timeoutMs = 60_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function waitRunning(s: RunningServer, slug: string): Promise<Workspace> {
  return waitFor(`${slug} running`, async () => {
    const r = await s.api<{ workspace: Workspace }>('GET', `/api/workspaces/${slug}`);
    return r.status === 200 && r.body.workspace.state === 'running' ? r.body.workspace : undefined;
  });
}

/** The workspaces' containers of an instance: containersOf less the warm sandboxes no fork has claimed yet. */
export function workspaceContainersOf(instance: string): string[] {
  const out = execFileSync('docker', ['ps', '-a', '--filter', `label=grove.instance=${instance}`, '--format', '{{.ID}} {{.Names}}'], { encoding: 'utf8' });
  return out
    .split('\n')
    .filter((l) => l && !l.includes(`grove-${instance}_warm-`))
    .map((l) => l.split(' ')[0] ?? '');
}

export function containersOf(instance: string, all = true): string[] {
  const out = execFileSync('docker', ['ps', ...(all ? ['-a'] : []), '-q', '--filter', `label=grove.instance=${instance}`], { encoding: 'utf8' });
  return out.split('\n').filter(Boolean);
}

/**
 * The container serving slug: found by its name, which a cold start gives it and a warm sandbox's claim renames it to
 * (labels cannot change on a running container, so a claimed one has no grove.slug label).
 */
export function containerOf(instance: string, slug: string): string | undefined {
  const name = `^${containerName(instance, slug).replaceAll('.', '\\.')}$`;
  const out = execFileSync('docker', ['ps', '-a', '-q', '--filter', `label=grove.instance=${instance}`, '--filter', `name=${name}`], { encoding: 'utf8' });
  return out.split('\n').filter(Boolean)[0];
}

/**
 * A command in a sandbox as the agent runs it (uid 1000). `user: '0:0'` runs it as the backend's own user (root in
 * the container, with the container's three capabilities), standing in for a backend that was exploited.
 */
export function dockerExec(container: string, cmd: string[], o: { user?: string } = {}): { code: number; out: string } {
  const argv = o.user ? ['exec', '-u', o.user, container, ...cmd] : agentExec(container, cmd);
  try {
    return { code: 0, out: execFileSync('docker', argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }) };
  } catch (e) {
    const err = e as { status?: number; stdout?: string; stderr?: string };
    return { code: err.status ?? 1, out: `${err.stdout ?? ''}${err.stderr ?? ''}` };
  }
}

/** The `docker` argv that runs cmd in a sandbox as the agent (uid 1000), on this run's runtime. */
export function agentExec(container: string, cmd: string[], o: { interactive?: boolean; detach?: boolean } = {}): string[] {
  return agentExecArgs(container, cmd, { runtime: TEST_RUNTIME, ...o });
}

export function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'safe.directory=*', ...args], { cwd, encoding: 'utf8' }).trim();
}

/** Remove every container of this Grove home and the home itself. */
/**
 * A bare repository at `<home>/upstream.git` whose main has one commit with `files` (path → content), made from a
 * work tree at `<home>/src`. Returns the bare repository's path.
 */
export function makeUpstream(home: string, files: Record<string, string>): string {
  const src = path.join(home, 'src');
  const upstream = path.join(home, 'upstream.git');
  fs.mkdirSync(src, { recursive: true });
  git(src, 'init', '-q', '-b', 'main');
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(src, name)), { recursive: true });
    fs.writeFileSync(path.join(src, name), text);
  }
  git(src, 'add', '.');
  git(src, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'first');
  git(home, 'clone', '-q', '--bare', src, upstream);
  return upstream;
}

export function cleanup(home: string): void {
  const ids = containersOf(instanceOf(home));
  if (ids.length) execFileSync('docker', ['rm', '-f', ...ids], { stdio: 'ignore' });
  unmountUnder(home);
  fs.rmSync(home, { recursive: true, force: true });
}

/**
 * Workspaces' disk images stay mounted when the server stops (they survive a restart by design): unmount what is
 * under home, newest first, so removing it neither fails on a mount point nor leaves a loop device behind.
 */
export function unmountUnder(home: string): void {
  const points = fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => (l.split(' ')[4] ?? '').replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(Number.parseInt(o, 8))))
    .filter((p) => p.startsWith(`${home}/`));
  for (const p of points.reverse()) execFileSync('umount', ['--', p]);
}

/** Collect stream frames from /w/<slug>/stream until `until` says stop. */
export function openStream(s: RunningServer, slug: string): { frames: StreamFrame[]; ready: Promise<void>; until(pred: (f: StreamFrame) => boolean, timeoutMs?: number): Promise<StreamFrame>; close(): void } {
  const frames: StreamFrame[] = [];
  const waiters: Array<{ pred: (f: StreamFrame) => boolean; resolve: (f: StreamFrame) => void }> = [];
  const sock = new WebSocket(`${s.base.replace('http', 'ws')}/w/${slug}/stream`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const ready = new Promise<void>((resolve, reject) => {
    sock.once('open', () => resolve());
    sock.once('error', reject);
    sock.once('unexpected-response', (_q, r) => reject(new Error(`upgrade refused: ${r.statusCode}`)));
  });
  sock.on('message', (m) => {
    const f = JSON.parse(String(m)) as StreamFrame;
    frames.push(f);
    for (const w of [...waiters]) {
      if (w.pred(f)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(f);
      }
    }
  });
  return {
    frames,
    ready,
    until(pred, timeoutMs = 30_000) {
      const seen = frames.find(pred);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`no matching frame; got ${JSON.stringify(frames).slice(0, 500)}`)), timeoutMs);
        waiters.push({ pred, resolve: (f) => (clearTimeout(t), resolve(f)) });
      });
    },
    close: () => sock.close(),
  };
}

/**
 * The usual test-file fixture: a fresh home, the real server started before the tests with the
 * demo project's default workspace running, stopped and cleaned up after them.
 */
export function useServer(
  prefix: string,
  env: Record<string, string> = {},
): { readonly s: RunningServer; readonly home: string; restart(): Promise<RunningServer> } {
  const home = makeHome(prefix);
  let server: RunningServer | undefined;
  beforeAll(async () => {
    server = await startServer({ home, env });
    await waitRunning(server, 'demo');
  });
  afterAll(async () => {
    await server?.stop();
    cleanup(home);
  });
  return {
    home,
    get s() {
      if (!server) throw new Error('server not started yet');
      return server;
    },
    /**
     * A new server on the same home and env, for tests of what survives a restart; the test stops or kills the
     * old one first (how it ends is what such a test is about). `s` is the new one from then on.
     */
    async restart() {
      server = await startServer({ home, env });
      return server;
    },
  };
}
