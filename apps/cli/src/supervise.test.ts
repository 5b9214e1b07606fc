// grove up / down supervision: the health probe and stopping a server (real HTTP servers and processes).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isAlive, serverFiles } from './server-process.ts';
import { healthy, stopServer } from './supervise.ts';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

async function serve(status: number, body: string): Promise<string> {
  const srv = http.createServer((_req, res) => res.writeHead(status, { 'content-type': 'application/json' }).end(body));
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  cleanups.push(() => srv.close());
  return `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
}

/** A node process that ignores SIGTERM (or not), with its pid file written as grove up writes it. */
async function server(ignoreTerm: boolean): Promise<{ child: ChildProcess; pid: number; files: ReturnType<typeof serverFiles> }> {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'grove-cli-supervise-'));
  const code = `${ignoreTerm ? "process.on('SIGTERM', () => undefined);" : ''} setInterval(() => undefined, 1000); console.log('up');`;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'ignore'] });
  cleanups.push(() => {
    child.kill('SIGKILL');
    fs.rmSync(home, { recursive: true, force: true });
  });
  // Once it printed, its SIGTERM handler is in place.
  await new Promise((r) => child.stdout?.once('data', r));
  const files = serverFiles(home);
  fs.writeFileSync(files.pid, `${child.pid}\n`);
  return { child, pid: child.pid ?? -1, files };
}

describe('healthy', () => {
  it('is true only for a health answer in the contracts shape', async () => {
    expect(await healthy(await serve(200, '{"ok":true}'))).toBe(true);
    expect(await healthy(await serve(200, '{"ok":false}'))).toBe(false);
    expect(await healthy(await serve(503, '{"ok":true}'))).toBe(false);
    expect(await healthy('http://127.0.0.1:9')).toBe(false);
  });
});

describe('stopServer', () => {
  it('sends SIGTERM, waits until the process is gone and removes its pid file', async () => {
    const s = await server(false);
    const exited = new Promise((r) => s.child.once('exit', (_c, signal) => r(signal)));
    await stopServer({ pid: s.pid, files: s.files, timeoutSeconds: 30 });
    expect(await exited).toBe('SIGTERM');
    expect(isAlive(s.pid)).toBe(false);
    expect(fs.existsSync(s.files.pid)).toBe(false);
  });

  it('gives up on a server that does not exit, says how to force it and keeps its pid file', async () => {
    const s = await server(true);
    await expect(stopServer({ pid: s.pid, files: s.files, timeoutSeconds: 1 })).rejects.toThrow(`did not exit within 1s of SIGTERM; see ${s.files.log} (kill -9 ${s.pid} forces it)`);
    expect(isAlive(s.pid)).toBe(true);
    expect(fs.existsSync(s.files.pid)).toBe(true);
  });
});
