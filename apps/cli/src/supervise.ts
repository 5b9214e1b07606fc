// `grove up` / `grove down` supervision: run setup, start the server (detached, or attached to this terminal),
// wait until it answers or dies, forward signals while attached; SIGTERM it and wait until it is gone.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { endpoints } from '@grove/contracts';
import { createClient as createGroveClient } from '@grove/client';
import type { CliEnv } from './env.ts';
import { isAlive, logTail, repoRoot, runningPid, serverCommand, type ServerFiles } from './server-process.ts';

const POLL_MS = 250;

/** Whether a Grove server answers at `url` (its health endpoint, within 2 s). */
export async function healthy(url: string): Promise<boolean> {
  try {
    await createGroveClient({ baseUrl: url }).health({ signal: AbortSignal.timeout(2_000) });
    return true;
  } catch {
    return false;
  }
}

export interface StartOptions {
  env: CliEnv;
  files: ServerFiles;
  /** Run scripts/setup.sh first. */
  setup: boolean;
  /** Keep the server attached to this terminal instead of its own session. */
  foreground: boolean;
  timeoutSeconds: number;
  /** Where setup, an attached server and the progress write. */
  stderr: NodeJS.WriteStream;
}

export interface StartedServer {
  pid: number;
  /** The process this call started; undefined when it waited for one started earlier. */
  child: ChildProcess | undefined;
}

/** Start the server of this clone (or wait for one started earlier that does not answer yet) until it answers. */
export async function startServer(o: StartOptions): Promise<StartedServer> {
  const { env, files, stderr } = o;
  const err = (line: string) => void stderr.write(`${line}\n`);
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
        const s = spawn('bash', [path.join(root, 'scripts', 'setup.sh')], { cwd: root, env: env.serverEnv, stdio: ['ignore', stderr, stderr] });
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
  await untilHealthy({ ...o, pid, child });
  return { pid, child };
}

/** Poll until the server answers; fail when it exits first or does not answer within the timeout. */
async function untilHealthy(o: StartOptions & StartedServer): Promise<void> {
  const { env, files, stderr, pid, child } = o;
  const until = Date.now() + o.timeoutSeconds * 1000;
  const tty = stderr.isTTY;
  const where = o.foreground ? '' : `, log: ${files.log}`;
  let dots = 0;
  if (!tty) stderr.write(`grove: starting Grove (pid ${pid}${where})\n`);
  for (;;) {
    if (await healthy(env.url)) break;
    if (!isAlive(pid) || child?.exitCode != null || child?.signalCode != null) {
      if (tty) stderr.write('\n');
      fs.rmSync(files.pid, { force: true });
      throw new Error(`the server exited before it answered${o.foreground ? ' (its output is above)' : `; the end of ${files.log}:\n${logTail(files.log)}`}`);
    }
    if (Date.now() > until) {
      if (tty) stderr.write('\n');
      throw new Error(`the server (pid ${pid}) does not answer at ${env.url}${endpoints.health.path} after ${o.timeoutSeconds}s; it keeps starting in the background (see ${files.log}; stop it with grove down)`);
    }
    if (tty) stderr.write(`\rgrove: starting Grove (pid ${pid}${where}) ${'.'.repeat((dots = (dots % 3) + 1)).padEnd(3)}`);
    await sleep(POLL_MS);
  }
  if (tty) stderr.write('\rgrove: Grove answers' + ' '.repeat(40) + '\n');
}

/** An attached server: Ctrl-C reaches it too (same process group); wait for its graceful exit, then its exit code. */
export async function untilExited(child: ChildProcess, files: ServerFiles): Promise<number> {
  const forward = (signal: NodeJS.Signals) => () => child.kill(signal);
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', forward('SIGTERM'));
  const code = await new Promise<number>((resolve) => child.once('exit', (c, s) => resolve(c ?? (s ? 1 : 0))));
  fs.rmSync(files.pid, { force: true });
  return code;
}

/** SIGTERM the server started by `grove up` and wait until it has exited; then its pid file goes. */
export async function stopServer(o: { pid: number; files: ServerFiles; timeoutSeconds: number }): Promise<void> {
  const { pid, files } = o;
  process.kill(pid, 'SIGTERM');
  const until = Date.now() + o.timeoutSeconds * 1000;
  while (isAlive(pid)) {
    if (Date.now() > until) throw new Error(`the server (pid ${pid}) did not exit within ${o.timeoutSeconds}s of SIGTERM; see ${files.log} (kill -9 ${pid} forces it)`);
    await sleep(100);
  }
  fs.rmSync(files.pid, { force: true });
}
