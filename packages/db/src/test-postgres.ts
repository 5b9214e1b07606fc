/**
 * A throwaway PostgreSQL cluster for tests and benchmarks: initdb into a temp dir, listening only on a Unix socket
 * there (no TCP), fsync off. Postgres refuses to run as root, so as root the cluster runs as `nobody` (owner of the
 * temp dir). The server is this process's child with a parent-death signal, so a test worker that is killed takes
 * its cluster with it. Fails with a message that says what is missing; never skips.
 */
import { execFile, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

const run = promisify(execFile);
const USER = 'grove';
const ADMIN_DB = 'postgres';
const RUN_AS = 'nobody';
const START_TIMEOUT_MS = 60_000;

export interface TestPostgres {
  /** The URL of a database in the cluster (over its Unix socket). */
  url(database?: string): string;
  /** A new empty database; returns its URL. */
  createDatabase(prefix?: string): Promise<string>;
  /** Stop the cluster and remove its directory. */
  stop(): Promise<void>;
}

/** The directory holding initdb and postgres: Debian's newest /usr/lib/postgresql/<v>/bin, else pg_config's. */
async function binDir(): Promise<string | null> {
  const root = '/usr/lib/postgresql';
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((v) => /^\d+$/.test(v) && existsSync(join(root, v, 'bin', 'initdb')) && existsSync(join(root, v, 'bin', 'postgres')))
      .sort((a, b) => Number(b) - Number(a));
    if (versions[0]) return join(root, versions[0], 'bin');
  }
  const fromConfig = await run('pg_config', ['--bindir']).then(
    (r) => r.stdout.trim(),
    () => '',
  );
  return fromConfig && existsSync(join(fromConfig, 'initdb')) ? fromConfig : null;
}

async function uidOf(user: string): Promise<{ uid: number; gid: number }> {
  const [{ stdout: u }, { stdout: g }] = await Promise.all([run('id', ['-u', user]), run('id', ['-g', user])]);
  return { uid: Number(u.trim()), gid: Number(g.trim()) };
}

export async function startTestPostgres(): Promise<TestPostgres> {
  const bin = await binDir();
  if (!bin) {
    throw new Error('PostgreSQL server binaries (initdb, postgres) not found: run scripts/setup.sh --with-browser (it installs Debian\'s postgresql) or apt-get install postgresql');
  }
  const dir = await mkdtemp(join(tmpdir(), 'grove-pg-'));
  const data = join(dir, 'data');
  const log = join(dir, 'postgres.log');
  const asRoot = process.getuid?.() === 0;
  const owner = asRoot ? await uidOf(RUN_AS) : null;
  if (owner) await chown(dir, owner.uid, owner.gid);
  // As root: runuser drops to the unprivileged user for every server-side command.
  const cmd = (file: string, args: string[]) => (asRoot ? run('runuser', ['-u', RUN_AS, '--', join(bin, file), ...args]) : run(join(bin, file), args));
  const fail = (what: string, e: unknown): Error => {
    const tail = existsSync(log) ? `\n${readFileSync(log, 'utf8').split('\n').slice(-15).join('\n')}` : '';
    const stderr = (e as { stderr?: string }).stderr?.trim();
    return new Error(`the test PostgreSQL cluster could not ${what} (${bin}): ${stderr || (e instanceof Error ? e.message : String(e))}${tail}`, { cause: e });
  };
  try {
    await cmd('initdb', ['-D', data, '-U', USER, '-A', 'trust', '--no-sync', '-E', 'UTF8', '--locale=C']);
  } catch (e) {
    await rm(dir, { recursive: true, force: true });
    throw fail('be created (initdb)', e);
  }
  const url = (database = ADMIN_DB): string => `postgres://${USER}@/${database}?host=${encodeURIComponent(dir)}`;
  // Only the socket in our own directory: nothing listens on TCP, nothing outside this dir can be reached.
  // setpriv drops to the unprivileged user (as root) and has the kernel send SIGQUIT (immediate shutdown) to the
  // server when this process dies, however it dies.
  const settings = ['listen_addresses=', 'fsync=off', 'full_page_writes=off', 'synchronous_commit=off', 'max_connections=200'];
  const logFd = openSync(log, 'a');
  const server = spawn(
    'setpriv',
    [
      ...(owner ? ['--reuid', String(owner.uid), '--regid', String(owner.gid), '--clear-groups'] : []),
      '--pdeathsig',
      'QUIT',
      '--',
      join(bin, 'postgres'),
      '-D',
      data,
      '-k',
      dir,
      ...settings.flatMap((c) => ['-c', c]),
    ],
    { stdio: ['ignore', logFd, logFd] },
  );
  closeSync(logFd);
  const exited = new Promise<number | null>((resolve) => server.once('exit', (code) => resolve(code)));
  let spawnError: Error | null = null;
  server.once('error', (e) => (spawnError = e));
  try {
    // Ready when it takes a connection; failed when it exits first or does not answer in time.
    const deadline = Date.now() + START_TIMEOUT_MS;
    for (;;) {
      if (spawnError) throw spawnError;
      if (server.exitCode !== null || server.signalCode !== null) throw new Error(`postgres exited (${server.exitCode ?? server.signalCode})`);
      const client = new pg.Client({ connectionString: url() });
      const ok = await client.connect().then(
        () => true,
        () => false,
      );
      await client.end().catch(() => undefined);
      if (ok) break;
      if (Date.now() > deadline) throw new Error(`postgres did not take connections within ${START_TIMEOUT_MS} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
  } catch (e) {
    const err = fail('start (postgres)', e);
    server.kill('SIGKILL');
    await exited;
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  let n = 0;
  let stopped = false;
  return {
    url,
    async createDatabase(prefix = 'grove') {
      const name = `${prefix}_${process.pid}_${++n}`;
      const client = new pg.Client({ connectionString: url() });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE "${name}"`);
      } finally {
        await client.end();
      }
      return url(name);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      try {
        // Immediate shutdown (SIGQUIT): the data is thrown away anyway, so no checkpoint is written.
        if (server.exitCode === null && server.signalCode === null) server.kill('SIGQUIT');
        await exited;
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  };
}
