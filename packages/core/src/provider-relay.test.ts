// The credential relay and the host hook listener on real Unix sockets, without Docker.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HostServices } from './host-services.ts';
import { createProviderRelay } from './provider-relay.ts';
import { startFakeAnthropic } from './test-support/fake-anthropic.ts';
import type { FakeAnthropic } from './test-support/fake-anthropic.ts';

const logger = pino({ level: 'silent' });
let dir: string;
let fake: FakeAnthropic;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gr-'));
  fake = await startFakeAnthropic();
});
afterAll(async () => {
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
});

function call(socketPath: string, o: { method?: string; path: string; headers?: Record<string, string>; body?: unknown }): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const body = o.body === undefined ? undefined : JSON.stringify(o.body);
    const req = request({ socketPath, path: o.path, method: o.method ?? 'POST', headers: { 'content-type': 'application/json', ...o.headers } }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('provider relay', () => {
  it('replaces whatever credentials the sandbox sends with the host key and streams the answer back', async () => {
    const relay = createProviderRelay({ slug: 'demo', socketPath: join(dir, 'p1.sock'), upstream: new URL(fake.url), apiKey: 'sk-host', logger });
    await relay.listen();
    try {
      const r = await call(join(dir, 'p1.sock'), {
        path: '/v1/messages?beta=true',
        headers: { 'x-api-key': 'grove-placeholder-key', authorization: 'Bearer stolen', 'anthropic-version': '2023-06-01' },
        body: { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] },
      });
      expect(r.status).toBe(200);
      expect(r.text).toContain('event: message_stop');
      const seen = fake.requests.at(-1);
      expect(seen?.headers).toMatchObject({ 'x-api-key': 'sk-host', 'anthropic-version': '2023-06-01', host: new URL(fake.url).host });
      expect(seen?.headers.authorization).toBeUndefined();
    } finally {
      await relay.close();
    }
  });

  it('relays only the /v1 API, and says so without a key', async () => {
    const withKey = createProviderRelay({ slug: 'demo', socketPath: join(dir, 'p2.sock'), upstream: new URL(fake.url), apiKey: 'sk-host', logger });
    const noKey = createProviderRelay({ slug: 'demo', socketPath: join(dir, 'p3.sock'), upstream: new URL(fake.url), apiKey: null, logger });
    await withKey.listen();
    await noKey.listen();
    try {
      const before = fake.requests.length;
      for (const path of ['/admin', '/v1/../admin', '/v1/./messages', 'http://evil.example/v1/messages']) {
        expect((await call(join(dir, 'p2.sock'), { path, method: 'GET' })).status, path).toBe(404);
      }
      const refused = await call(join(dir, 'p3.sock'), { path: '/v1/messages', body: {} });
      expect(refused.status).toBe(503);
      expect(refused.text).toContain('ANTHROPIC_API_KEY');
      expect(fake.requests.length).toBe(before);
    } finally {
      await withKey.close();
      await noKey.close();
    }
  });
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
