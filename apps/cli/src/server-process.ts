// `grove up` / `grove down`: find the clone this CLI belongs to, start its server as a process (never
// imported: apps do not depend on apps), keep its pid and log under GROVE_HOME, and stop it again.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

/**
 * The clone this CLI runs from: apps/cli/src/ (or apps/cli/dist/, the bundle, at the same depth) → the repository
 * root. Never the caller's cwd.
 */
export function repoRoot(from: string = fileURLToPath(import.meta.url)): string {
  return path.resolve(path.dirname(from), '../../..');
}

export interface ServerFiles {
  pid: string;
  log: string;
}

export function serverFiles(home: string): ServerFiles {
  return { pid: path.join(home, 'grove.pid'), log: path.join(home, 'logs', 'server.log') };
}

const serverPackageSchema = z.object({ scripts: z.object({ start: z.string().min(1) }) });

/**
 * apps/server's start script as argv for this very node binary: `node --import tsx src/main.ts` becomes
 * [execPath, '--import', 'tsx', 'src/main.ts'], run in apps/server. Running node directly (not through
 * npm) makes the pid file name the server itself, so `grove down` signals it and sees it exit.
 */
export function parseStartScript(script: string, execPath: string): string[] {
  const words = script.trim().split(/\s+/);
  if (words[0] !== 'node' || words.length < 2 || words.some((w) => /["'`$;&|<>\\]/.test(w))) {
    throw new Error(`apps/server's start script is not a plain "node ..." command (${JSON.stringify(script)}); start Grove with: npm run up`);
  }
  return [execPath, ...words.slice(1)];
}

export function serverCommand(root: string, execPath: string): { argv: string[]; cwd: string } {
  const cwd = path.join(root, 'apps', 'server');
  const pkgFile = path.join(cwd, 'package.json');
  let pkg: unknown;
  try {
    pkg = JSON.parse(fs.readFileSync(pkgFile, 'utf8'));
  } catch (e) {
    throw new Error(`grove up starts the server of a Grove clone, but ${pkgFile} is not readable (${(e as Error).message})`);
  }
  const parsed = serverPackageSchema.safeParse(pkg);
  if (!parsed.success) throw new Error(`${pkgFile} has no scripts.start`);
  return { argv: parseStartScript(parsed.data.scripts.start, execPath), cwd };
}

/** Whether a process runs: a zombie (exited, not yet reaped by its new parent) counts as gone. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 3, after the parenthesised command name (which may itself contain spaces or parentheses).
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true;
  }
}

/** The pid in GROVE_HOME/grove.pid if that process still runs and is a Grove server; a stale file is removed. */
export function runningPid(files: ServerFiles): number | null {
  let text: string;
  try {
    text = fs.readFileSync(files.pid, 'utf8').trim();
  } catch {
    return null;
  }
  const pid = Number(text);
  let ours = Number.isInteger(pid) && pid > 1 && isAlive(pid);
  if (ours) {
    // A reused pid must not be signalled: on Linux, check that it is still the server's command line.
    try {
      ours = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('main.ts');
    } catch {
      // No /proc here: trust the pid file.
    }
  }
  if (ours) return pid;
  fs.rmSync(files.pid, { force: true });
  return null;
}

/** The last lines of the server log, for an error message. */
export function logTail(file: string, lines = 15): string {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}
