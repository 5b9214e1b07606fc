// The bundled demo project: a small git repository made from infra/demo-repo on first start.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);

/** Creates <home>/demo-src as a git repository with one commit on main, once; returns its path. */
export async function ensureDemoRepo(opts: { home: string; filesDir: string }): Promise<string> {
  const dir = path.join(opts.home, 'demo-src');
  if (fs.existsSync(path.join(dir, '.git'))) return dir;
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  fs.cpSync(opts.filesDir, dir, { recursive: true });
  const git = (...args: string[]) =>
    exec('git', ['-c', 'user.name=Grove', '-c', 'user.email=grove@localhost', '-c', 'init.defaultBranch=main', ...args], { cwd: dir });
  await git('init', '-q');
  await git('add', '-A');
  await git('commit', '-q', '-m', 'Demo project');
  return dir;
}
