// The in-container relay, in process: bytes go through unchanged both ways; without a gate, a clear 502.
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createEgressRelay } from './egress-relay.ts';

const dir = mkdtempSync(join(tmpdir(), 'grove-relay-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Send bytes to 127.0.0.1:port, collect everything until the other side closes. */
function exchange(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let out = '';
    s.on('connect', () => s.write(text));
    s.on('data', (d: Buffer) => (out += d.toString()));
    s.on('close', () => resolve(out));
    s.on('error', reject);
  });
}

describe('egress relay', () => {
  it('pipes each connection to the gate socket, both ways', async () => {
    const socketPath = join(dir, 'gate.sock');
    const seen: string[] = [];
    const gate: Server = createServer((s) => {
      s.on('data', (d: Buffer) => {
        seen.push(d.toString());
        s.end(`echo:${d.toString()}`);
      });
    });
    await new Promise<void>((r) => gate.listen(socketPath, r));
    const relay = createEgressRelay({ socketPath, port: 0 });
    const port = await relay.listen();
    expect(await exchange(port, 'CONNECT a.example:443 HTTP/1.1\r\n\r\n')).toBe('echo:CONNECT a.example:443 HTTP/1.1\r\n\r\n');
    expect(seen).toEqual(['CONNECT a.example:443 HTTP/1.1\r\n\r\n']);
    await relay.close();
    await new Promise((r) => gate.close(r));
  });

  it('answers 502 naming the missing gate when its socket is absent', async () => {
    const relay = createEgressRelay({ socketPath: join(dir, 'absent.sock'), port: 0 });
    const port = await relay.listen();
    const reply = await exchange(port, 'GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n');
    expect(reply).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n/);
    const body = JSON.parse(reply.slice(reply.indexOf('\r\n\r\n') + 4)) as { code: string; message: string };
    expect(body.code).toBe('egress_upstream');
    expect(body.message).toContain('ENOENT');
    expect(body.message).toContain('absent.sock');
    await relay.close();
  });

  it('answers a silent client too, instead of hanging', async () => {
    const relay = createEgressRelay({ socketPath: join(dir, 'absent.sock'), port: 0, answerDelayMs: 50 });
    const port = await relay.listen();
    const reply = await new Promise<string>((resolve) => {
      const s = connect(port, '127.0.0.1');
      let out = '';
      s.on('data', (d: Buffer) => (out += d.toString()));
      s.on('close', () => resolve(out));
    });
    expect(reply).toMatch(/^HTTP\/1\.1 502/);
    await relay.close();
  });
});
