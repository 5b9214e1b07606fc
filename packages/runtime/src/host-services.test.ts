// The host hook listener (host.sock) on a real Unix socket, without Docker.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../../egress/src/test-support/unix-http.ts';
import { HostServices } from './host-services.ts';

const logger = pino({ level: 'silent' });
let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gr-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('host hook listener', () => {
  it('answers POST /turn-ended with the after-turn work, refuses anything else, and replaces a stale socket', async () => {
    const runDir = join(dir, 'run');
    mkdirSync(runDir);
    const calls: string[] = [];
    const host = new HostServices({
      logger,
      runDir: () => runDir,
      onTurnEnded: async (slug, req) => {
        calls.push(`${slug}:${req.turn}:${req.status}`);
        return { events: [{ type: 'snapshot', ref: 'refs/grove/demo/turns/1', commit: 'c', files: ['a'] }] };
      },
    });
    await host.ensure('demo');
    await host.ensure('demo'); // idempotent
    const ok = await call(join(runDir, 'host.sock'), { path: '/turn-ended', body: { turn: 'turn-1', status: 'completed' } });
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.text)).toEqual({ events: [{ type: 'snapshot', ref: 'refs/grove/demo/turns/1', commit: 'c', files: ['a'] }] });
    expect((await call(join(runDir, 'host.sock'), { path: '/turn-ended', body: { turn: 'turn-1', status: 'weird' } })).status).toBe(422);
    expect((await call(join(runDir, 'host.sock'), { path: '/other', body: {} })).status).toBe(404);
    expect(calls).toEqual(['demo:turn-1:completed']);
    await host.closeAll();
    // A socket file left by a killed server process is replaced, not an error.
    const again = new HostServices({ logger, runDir: () => runDir, onTurnEnded: async () => ({ events: [] }) });
    const stale = createServer();
    await new Promise<void>((resolve) => stale.listen(join(runDir, 'host.sock'), resolve));
    stale.close();
    await again.ensure('demo');
    expect((await call(join(runDir, 'host.sock'), { path: '/turn-ended', body: { turn: 'turn-2', status: 'failed' } })).status).toBe(200);
    await again.closeAll();
  });
});
