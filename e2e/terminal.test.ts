// The workspace terminal against the real stack: a shell on a pty in the real sandbox, reached through the Grove
// server's /w/<slug>/terminals (HTTP + WebSocket, authorized like every /w/ upgrade): it runs as uid 1000, follows
// resizes, replays its scrollback on reconnect, stops at 8, has no network and cannot read /run/grove.
import { describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import type { CreateTerminalResponse, TerminalListResponse } from '@grove/contracts';
import { TERMINAL_EXIT_CLOSE_CODE } from '@grove/contracts';
import { TOKEN, useServer } from './harness.ts';

const ctx = useServer('terminal');
const SLUG = 'demo';

interface Conn {
  ws: WebSocket;
  /** Everything received so far, as text. */
  text(): string;
  until(pattern: RegExp, timeoutMs?: number): Promise<string>;
  closed: Promise<{ code: number; reason: string }>;
}

function connect(id: string, headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` }): Promise<Conn> {
  const ws = new WebSocket(`${ctx.s.base.replace(/^http/, 'ws')}/w/${SLUG}/terminals/${id}/socket`, { headers });
  let received = '';
  const waiters = new Set<() => void>();
  ws.on('message', (m: Buffer) => {
    received += m.toString('utf8');
    for (const w of waiters) w();
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  const conn: Conn = {
    ws,
    text: () => received,
    closed,
    until: (pattern, timeoutMs = 15_000) =>
      new Promise((resolve, reject) => {
        const check = () => {
          const m = pattern.exec(received);
          if (!m) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(m[0]);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out waiting for ${pattern} in terminal output:\n${received.slice(-2000)}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      }),
  };
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(conn));
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => reject(new Error(`upgrade refused: ${res.statusCode} ${body}`)));
    });
  });
}

/** Types a line as the browser does: keyboard bytes in a binary frame. */
function type(c: Conn, line: string): void {
  c.ws.send(Buffer.from(`${line}\r`), { binary: true });
}

async function open(cols = 100, rows = 30): Promise<string> {
  const r = await ctx.s.api<CreateTerminalResponse>('POST', `/w/${SLUG}/terminals`, { cols, rows });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.id;
}

describe('workspace terminal', () => {
  it('runs a shell as uid 1000 on a pty, follows resizes, replays its scrollback, and ends when the shell exits', async () => {
    const id = await open(100, 30);
    const c = await connect(id);
    // The echo of the typed line holds neither 1000 nor 42: only the shell's output can satisfy the waits.
    type(c, 'id -u; echo $((6*7)); pwd; stty size');
    await c.until(/\n30 100\r\n/);
    // Each output line starts after a \r (of \r\n, or of bash's ESC[?2004l\r that ends bracketed-paste mode).
    expect(c.text()).toMatch(/\r1000\r\n42\r\n\/workspace\r\n/);

    // Resize: a JSON control frame, never typed into the shell.
    c.ws.send(JSON.stringify({ type: 'resize', cols: 120, rows: 40 }));
    type(c, 'stty size; echo "mark=$((1+1))"');
    await c.until(/\r40 120\r\nmark=2/);
    const listed = await ctx.s.api<TerminalListResponse>('GET', `/w/${SLUG}/terminals`);
    expect(listed.body.terminals.find((t) => t.id === id)).toMatchObject({ cols: 120, rows: 40 });

    // Drop the connection; the shell lives on, and a new socket first replays what was on the screen.
    type(c, 'echo "before=$((3*3))"');
    await c.until(/before=9/);
    c.ws.terminate();
    await c.closed;
    const again = await connect(id);
    await again.until(/before=9/);
    expect(again.text()).toMatch(/\r1000\r\n42\r\n/);
    type(again, 'echo "after=$((5*5))"');
    await again.until(/after=25/);

    // A shell that exits ends its terminal: the socket closes with the reason, the list forgets it.
    type(again, 'exit 3');
    const closed = await again.closed;
    expect(closed.code).toBe(TERMINAL_EXIT_CLOSE_CODE);
    expect(closed.reason).toContain('status 3');
    const after = await ctx.s.api<TerminalListResponse>('GET', `/w/${SLUG}/terminals`);
    expect(after.body.terminals.map((t) => t.id)).not.toContain(id);
    await expect(connect(id)).rejects.toThrow(/404/);
  });

  it('has no network and cannot read /run/grove', async () => {
    const id = await open();
    const c = await connect(id);
    // bash's /dev/tcp: a direct connection out, bypassing any proxy variable.
    type(c, `(exec 3<>/dev/tcp/1.1.1.1/80) && echo "net=op""en" || echo "net=clo""sed"`);
    await c.until(/net=(open|closed)/);
    expect(c.text()).toContain('net=closed');
    expect(c.text()).toMatch(/Network is unreachable|No route to host/);
    // /run/grove exists (the backend's sockets) and is root's alone.
    type(c, `test -d /run/grove && echo "dir=th""ere"; ls /run/grove && echo "run=read""able" || echo "run=den""ied"`);
    await c.until(/run=(readable|denied)/);
    expect(c.text()).toContain('dir=there');
    expect(c.text()).toContain('run=denied');
    // runc says EACCES; gVisor's gofer answers EINVAL for a directory the user may not search.
    expect(c.text()).toMatch(/Permission denied|Invalid argument/);
    const del = await ctx.s.api('DELETE', `/w/${SLUG}/terminals/${id}`);
    expect(del.status).toBe(200);
    await c.closed;
  });

  it('refuses a 9th terminal with 429 terminal_limit, and an upgrade without the token', async () => {
    const before = await ctx.s.api<TerminalListResponse>('GET', `/w/${SLUG}/terminals`);
    const ids = before.body.terminals.map((t) => t.id);
    while (ids.length < 8) ids.push(await open());
    const ninth = await ctx.s.api<{ code: string }>('POST', `/w/${SLUG}/terminals`, { cols: 80, rows: 24 });
    expect(ninth.status).toBe(429);
    expect(ninth.body.code).toBe('terminal_limit');
    const bad = await ctx.s.api<{ code: string }>('POST', `/w/${SLUG}/terminals`, { cols: 0, rows: 24 });
    expect(bad.status).toBe(422);

    // The socket is behind the same authorization as every /w/ upgrade.
    const first = ids[0] ?? '';
    await expect(connect(first, {})).rejects.toThrow(/401/);
    await expect(connect(first, { authorization: 'Bearer wrong-token-0123456789' })).rejects.toThrow(/401/);
    await expect(connect(first, { cookie: `grove_token=${TOKEN}`, origin: 'http://evil.example' })).rejects.toThrow(/403/);

    for (const id of ids) expect((await ctx.s.api('DELETE', `/w/${SLUG}/terminals/${id}`)).status).toBe(200);
    expect((await ctx.s.api<TerminalListResponse>('GET', `/w/${SLUG}/terminals`)).body.terminals).toEqual([]);
  });
});
