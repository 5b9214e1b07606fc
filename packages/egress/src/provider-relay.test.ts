// The credential relay on real Unix sockets, without Docker (the host hook listener: runtime's host-services.test.ts).
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProviderRelay } from './provider-relay.ts';
import type { RelayRecord } from './provider-relay.ts';
import { startFakeAnthropic } from './test-support/fake-anthropic.ts';
import { call } from './test-support/unix-http.ts';
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

/** Sends raw bytes, returns everything the server sent until it closed (or 3 s passed). */
function rawExchange(socketPath: string, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(socketPath);
    let got = '';
    const t = setTimeout(() => s.destroy(), 3_000);
    s.on('connect', () => s.write(text));
    s.on('data', (d: Buffer) => (got += d.toString('latin1')));
    s.on('error', reject);
    s.on('close', () => {
      clearTimeout(t);
      resolve(got);
    });
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

  it('relays only the Messages API, and says so without a key', async () => {
    const withKey = createProviderRelay({ slug: 'demo', socketPath: join(dir, 'p2.sock'), upstream: new URL(fake.url), apiKey: 'sk-host', logger });
    const noKey = createProviderRelay({ slug: 'demo', socketPath: join(dir, 'p3.sock'), upstream: new URL(fake.url), apiKey: null, logger });
    await withKey.listen();
    await noKey.listen();
    try {
      const before = fake.requests.length;
      for (const path of ['/admin', '/v1/../admin', '/v1/./messages', 'http://evil.example/v1/messages']) {
        const r = await call(join(dir, 'p2.sock'), { path, method: 'POST', body: {} });
        expect(r.status, path).toBe(403);
        expect(JSON.parse(r.text), path).toMatchObject({ code: 'egress_denied', rule: 'path-not-relayed' });
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

// Issue 14, 8: the relay forwarded any method to any /v1/ path with the host's key. Only what Claude Code
// calls goes through; everything else is 403 with the rule named, audited, and never reaches the upstream.
describe('provider relay allowlist', () => {
  const socketPath = () => join(dir, 'allow.sock');
  let relay: ReturnType<typeof createProviderRelay>;
  const records: RelayRecord[] = [];
  beforeAll(async () => {
    relay = createProviderRelay({ slug: 'demo', socketPath: socketPath(), upstream: new URL(fake.url), apiKey: 'sk-host', logger, onRequest: (r) => records.push(r), maxBodyBytes: 4096 });
    await relay.listen();
  });
  afterAll(() => relay.close());

  it('relays the Messages API calls Claude Code makes, and the model list', async () => {
    const before = fake.requests.length;
    const stream = await call(socketPath(), { path: '/v1/messages?beta=true', body: { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] } });
    expect(stream.status).toBe(200);
    expect(stream.text).toContain('event: message_stop');
    expect((await call(socketPath(), { path: '/v1/messages', body: { model: 'm', messages: [] } })).status).toBe(200);
    expect(JSON.parse((await call(socketPath(), { path: '/v1/messages/count_tokens?beta=true', body: { model: 'm', messages: [] } })).text)).toEqual({ input_tokens: 42 });
    // The fake has no model list (404), but the request reached it: the relay let it through.
    await call(socketPath(), { path: '/v1/models?limit=20', method: 'GET' });
    await call(socketPath(), { path: '/v1/models/claude-sonnet-4-5', method: 'GET' });
    expect(fake.requests.slice(before).map((r) => `${r.method} ${r.url}`)).toEqual([
      'POST /v1/messages?beta=true',
      'POST /v1/messages',
      'POST /v1/messages/count_tokens?beta=true',
      'GET /v1/models?limit=20',
      'GET /v1/models/claude-sonnet-4-5',
    ]);
    expect(records.slice(-5).map((r) => r.rule)).toEqual(['messages', 'messages', 'count-tokens', 'models', 'models']);
  });

  it('refuses every other method, path and query with 403 naming the rule, audited, upstream untouched', async () => {
    const cases: Array<[method: string, path: string, rule: string]> = [
      ['DELETE', '/v1/files/file_123', 'path-not-relayed'],
      ['GET', '/v1/files', 'path-not-relayed'],
      ['GET', '/v1/organizations/users', 'path-not-relayed'],
      ['POST', '/v1/organizations/api_keys', 'path-not-relayed'],
      ['POST', '/v1/messages/batches', 'path-not-relayed'],
      ['GET', '/v1/messages/batches/msgbatch_1/results', 'path-not-relayed'],
      ['POST', '/v1/complete', 'path-not-relayed'],
      ['POST', '/v1/messages/', 'path-not-relayed'],
      ['POST', '/v1/%6dessages', 'path-not-relayed'],
      ['POST', '/v1//messages', 'path-not-relayed'],
      ['POST', '/v1/messages/../files', 'path-not-relayed'],
      ['PROPFIND', '/v1/messages', 'method-not-allowed'],
      ['GET', '/v1/messages', 'method-not-allowed'],
      ['DELETE', '/v1/messages', 'method-not-allowed'],
      ['PUT', '/v1/messages/count_tokens', 'method-not-allowed'],
      ['DELETE', '/v1/models/claude', 'method-not-allowed'],
      ['POST', '/v1/messages?beta=true&x=1', 'query-not-allowed'],
      ['POST', '/v1/messages?beta=true&beta=false', 'query-not-allowed'],
      ['POST', '/v1/messages?beta=%2e%2e', 'query-not-allowed'],
      ['POST', '/v1/messages?limit=1', 'query-not-allowed'],
    ];
    const before = fake.requests.length;
    for (const [method, path, rule] of cases) {
      const r = await call(socketPath(), { method, path, body: {} });
      const where = `${method} ${path}: ${r.text}`;
      expect(r.status, where).toBe(403);
      const body = JSON.parse(r.text) as Record<string, unknown>;
      expect(body, where).toMatchObject({ code: 'egress_denied', rule });
      expect(body.message, where).toContain(`(rule: ${rule})`);
      expect(records.at(-1), where).toMatchObject({ slug: 'demo', method, status: 403, rule });
    }
    expect(fake.requests.length).toBe(before);
  });

  it('drops every credential and forwarding header the sandbox sends, and the ones it names in Connection', async () => {
    await call(socketPath(), {
      path: '/v1/messages',
      headers: {
        'x-api-key': 'sk-sandbox',
        authorization: 'Bearer sandbox',
        cookie: 'session=sandbox',
        'proxy-authorization': 'Basic c2FuZGJveA==',
        'x-forwarded-for': '10.0.0.1',
        forwarded: 'for=10.0.0.1',
        via: '1.1 sandbox',
        connection: 'keep-alive, x-sneaky',
        'x-sneaky': 'hop',
        'anthropic-version': '2023-06-01',
        'anthropic-beta': 'claude-code-20250219',
      },
      body: { model: 'm', messages: [] },
    });
    const seen = fake.requests.at(-1)?.headers ?? {};
    expect(seen).toMatchObject({ 'x-api-key': 'sk-host', 'anthropic-version': '2023-06-01', 'anthropic-beta': 'claude-code-20250219' });
    for (const h of ['authorization', 'cookie', 'proxy-authorization', 'x-forwarded-for', 'forwarded', 'via', 'x-sneaky']) expect(seen[h], h).toBeUndefined();
  });

  it('refuses ambiguous framing before anything is forwarded', async () => {
    const before = fake.requests.length;
    const raw = (text: string) => rawExchange(socketPath(), text);
    // Both framings, two lengths: Node's parser refuses them; the relay answers JSON naming the rule.
    for (const head of [
      'POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      'POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}',
      'POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n{}',
      // Transfer-Encoding other than a single chunked: Node accepts it, the relay does not.
      'POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n',
      'POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
    ]) {
      const text = await raw(head);
      expect(text, head).toMatch(/^HTTP\/1\.1 400 /);
      expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)), head).toMatchObject({ rule: 'invalid-request' });
    }
    expect(fake.requests.length).toBe(before);
  });

  it('bounds the body: a declared length over the cap is refused unread, a chunked one is cut at the cap', async () => {
    const before = fake.requests.length;
    const big = await call(socketPath(), { path: '/v1/messages', body: { pad: 'x'.repeat(5000) } });
    expect(big.status).toBe(413);
    expect(JSON.parse(big.text)).toMatchObject({ code: 'egress_denied', rule: 'body-too-large' });
    const chunked = await rawExchange(
      socketPath(),
      `POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${'1000\r\n' + 'y'.repeat(4096) + '\r\n'}${'10\r\n' + 'z'.repeat(16) + '\r\n'}`,
    );
    expect(chunked).toMatch(/^HTTP\/1\.1 413 /);
    expect(records.at(-1)).toMatchObject({ status: 413, rule: 'body-too-large' });
    // The cut request never completed upstream.
    expect(fake.requests.length).toBe(before);
  });
});
