import { request } from 'node:http';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from './logger.ts';
import { waitForClaim } from './pool-wait.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'grove-pool-wait-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function call(socketPath: string, method: string, path: string, body?: string): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method, path, agent: false, headers: body ? { 'content-type': 'application/json' } : {} }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : null }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function listening(socket: string): Promise<void> {
  for (let i = 0; i < 200 && !existsSync(socket); i++) await new Promise((r) => setTimeout(r, 10));
}

describe('a warm sandbox waiting to be claimed', () => {
  it('answers only /pool and its claim, then hands over the slug and frees the socket', async () => {
    const socket = join(dir, 'backend.sock');
    const claimed = waitForClaim({ pool: '0123456789ab', socketPath: socket, logger: silentLogger, socketMode: 0o600 });
    await listening(socket);
    expect(statSync(socket).mode & 0o777).toBe(0o600);
    expect(await call(socket, 'GET', '/pool')).toEqual({ status: 200, body: { waiting: true, pool: '0123456789ab' } });
    // Nothing of a workspace before the claim: no thread, no health, no files.
    for (const path of ['/health', '/thread', '/files/tree?path=.']) expect((await call(socket, 'GET', path)).status).toBe(502);
    // Only one slug, nothing else.
    expect((await call(socket, 'POST', '/claim', JSON.stringify({ slug: '../etc' }))).status).toBe(422);
    expect((await call(socket, 'POST', '/claim', JSON.stringify({ slug: 'demo~a', env: { GROVE_SLUG: 'demo~b' } }))).status).toBe(422);
    expect((await call(socket, 'POST', '/claim', 'not json')).status).toBe(422);
    expect(await call(socket, 'POST', '/claim', JSON.stringify({ slug: 'demo~a' }))).toEqual({ status: 202, body: { slug: 'demo~a' } });
    expect(await claimed).toBe('demo~a');
    // The ordinary backend listens there next.
    expect(existsSync(socket)).toBe(false);
  });
});
