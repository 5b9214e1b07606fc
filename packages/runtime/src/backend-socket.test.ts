import { execFileSync } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyBackendSocket, verifyBackendSocketSync } from './backend-socket.ts';

const dir = mkdtempSync(join(tmpdir(), 'grove-backend-socket-'));
const servers: Server[] = [];
const listen = (path: string) =>
  new Promise<Server>((resolve) => {
    const s = createServer();
    servers.push(s);
    s.listen(path, () => resolve(s));
  });

beforeAll(async () => {
  await listen(join(dir, 'backend.sock'));
});

afterAll(() => {
  for (const s of servers) s.close();
  rmSync(dir, { recursive: true, force: true });
});

// The proxy checks on every request with the synchronous twin; both must refuse the same things.
const variants = [
  ['verifyBackendSocket', verifyBackendSocket],
  ['verifyBackendSocketSync', async (p: string, slug: string) => verifyBackendSocketSync(p, slug)],
] as const;

describe.each(variants)('%s', (name, check) => {
  it("accepts the backend's own socket and names it by device, inode and change time", async () => {
    const id = await check(join(dir, 'backend.sock'), 'demo');
    expect(id.key).toMatch(/^\d+:\d+:\d+$/);
  });

  it('refuses a symbolic link, even to a real socket, a regular file and a FIFO', async () => {
    symlinkSync(join(dir, 'backend.sock'), join(dir, `link-${name}.sock`));
    writeFileSync(join(dir, 'file.sock'), 'x');
    execFileSync('mkfifo', [join(dir, `fifo-${name}.sock`)]);
    await expect(check(join(dir, `link-${name}.sock`), 'demo')).rejects.toMatchObject({ code: 'backend_unavailable', message: expect.stringContaining('symbolic link') as string });
    for (const f of ['file.sock', `fifo-${name}.sock`]) {
      await expect(check(join(dir, f), 'demo')).rejects.toMatchObject({ code: 'backend_unavailable', message: expect.stringContaining('not a socket') as string });
    }
  });

  it.runIf(process.getuid?.() === 0)("refuses a socket owned by the agent's user", async () => {
    await listen(join(dir, `agent-${name}.sock`));
    chownSync(join(dir, `agent-${name}.sock`), 1000, 1000);
    await expect(check(join(dir, `agent-${name}.sock`), 'demo')).rejects.toMatchObject({ message: expect.stringContaining('uid 1000') as string });
  });

  it('tells a replaced socket apart, and an absent one is an error unless asked', async () => {
    const path = join(dir, `swap-${name}.sock`);
    const first = await listen(path);
    const before = await check(path, 'demo');
    first.close();
    rmSync(path, { force: true });
    await expect(check(path, 'demo')).rejects.toMatchObject({ code: 'backend_unavailable' });
    if (check === verifyBackendSocket) expect(await verifyBackendSocket(path, 'demo', { absent: 'ok' })).toBeNull();
    await listen(path);
    expect((await check(path, 'demo')).key).not.toBe(before.key);
  });
});
