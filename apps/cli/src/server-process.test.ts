// grove up / down helpers: the clone's root, the start script as argv, the pid file (real temp files and processes).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isAlive, parseStartScript, repoRoot, runningPid, serverCommand, serverFiles } from './server-process.ts';

const homes: string[] = [];
afterEach(() => {
  for (const h of homes.splice(0)) fs.rmSync(h, { recursive: true, force: true });
});
function home(): string {
  const h = fs.mkdtempSync(path.join(os.tmpdir(), 'grove-cli-up-'));
  homes.push(h);
  return h;
}

describe('repoRoot / serverCommand', () => {
  it('finds the clone from the CLI source file, not from the working directory', () => {
    const root = repoRoot();
    expect(fs.existsSync(path.join(root, 'scripts', 'setup.sh'))).toBe(true);
    expect(repoRoot('/x/y/apps/cli/src/main.ts')).toBe('/x/y');
  });
  it("runs apps/server's start script with this node binary", () => {
    const cmd = serverCommand(repoRoot(), '/opt/node');
    expect(cmd.cwd).toBe(path.join(repoRoot(), 'apps', 'server'));
    expect(cmd.argv[0]).toBe('/opt/node');
    expect(cmd.argv.at(-1)).toMatch(/main\.ts$/);
    expect(() => serverCommand(home(), '/opt/node')).toThrow(/clone/);
  });
  it('refuses a start script that is not a plain node command', () => {
    expect(parseStartScript('node --import tsx src/main.ts', '/n')).toEqual(['/n', '--import', 'tsx', 'src/main.ts']);
    for (const s of ['tsx src/main.ts', 'node', 'node a.js && rm -rf x', 'node "$X"']) expect(() => parseStartScript(s, '/n')).toThrow(/npm run up/);
  });
});

describe('runningPid / isAlive', () => {
  it('is null without a pid file, and removes a stale one or one naming a process that is not the server', async () => {
    const files = serverFiles(home());
    expect(runningPid(files)).toBeNull();
    fs.writeFileSync(files.pid, 'garbage\n');
    expect(runningPid(files)).toBeNull();
    expect(fs.existsSync(files.pid)).toBe(false);

    const other = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    await new Promise((r) => other.once('spawn', r));
    try {
      expect(isAlive(other.pid ?? -1)).toBe(true);
      fs.writeFileSync(files.pid, `${other.pid}\n`);
      expect(runningPid(files)).toBeNull();
    } finally {
      other.kill('SIGKILL');
      await new Promise((r) => other.once('exit', r));
    }
    expect(isAlive(other.pid ?? -1)).toBe(false);
  });

  it('answers the pid of a live server process', async () => {
    const files = serverFiles(home());
    // A stand-in whose command line names main.ts, as the server's does.
    const dir = home();
    fs.writeFileSync(path.join(dir, 'main.ts'), 'setTimeout(() => {}, 60000);\n');
    const srv = spawn(process.execPath, [path.join(dir, 'main.ts')], { stdio: 'ignore' });
    await new Promise((r) => srv.once('spawn', r));
    try {
      fs.writeFileSync(files.pid, `${srv.pid}\n`);
      expect(runningPid(files)).toBe(srv.pid);
    } finally {
      srv.kill('SIGKILL');
      await new Promise((r) => srv.once('exit', r));
    }
    expect(runningPid(files)).toBeNull();
  });
});
