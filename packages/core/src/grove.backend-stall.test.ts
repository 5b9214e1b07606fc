// Issue 14, 5b, through createGrove: a backend (it runs as the agent) that drips its /status answer one byte at
// a time cannot hold a stop. Real git repos, a real SQLite registry and the backend's real Unix socket, with the
// in-memory sandbox driver; the fake backend on the socket is swapped for a dripping one.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { useGroveFixture } from './test-support/grove-fixture.ts';

const fx = useGroveFixture({ tmpPrefix: 'grove-stall-', logLevel: process.env.GROVE_TEST_LOG, defaults: { maxRunning: 2, gitLockTimeoutMs: 5_000 } });

/** A byte every 200 ms of a 1,000-byte body: 200 s to finish. */
const DRIP_MS = 200;
const DRIP_BYTES = 1_000;

describe('a backend that drips its answers', () => {
  it('cannot hold a stop: /status gives up at its deadline and the workspace stops', async () => {
    const g = await fx.withProject();
    await g.fork({ project: 'demo', name: 'w' });
    const server = fx.driver.containers.get('demo~w')?.server;
    if (!server) throw new Error('the fake backend is not listening');
    let sent = 0;
    let asked = 0;
    const timers = new Set<NodeJS.Timeout>();
    server.removeAllListeners('request');
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      if (req.url !== '/status') {
        res.writeHead(404).end();
        return;
      }
      asked++;
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': DRIP_BYTES });
      res.flushHeaders();
      const t = setInterval(() => {
        if (res.destroyed) return;
        res.write(' ');
        sent++;
      }, DRIP_MS);
      timers.add(t);
      res.on('close', () => clearInterval(t));
    });
    try {
      const stopped = await g.stop('demo~w');
      expect(stopped).toMatchObject({ state: 'stopped' });
      expect(fx.driver.containers.get('demo~w')?.running).toBe(false);
      // The stop did ask the dripping backend, which was dripping, and gave up long before the drip's end.
      expect(asked).toBe(1);
      expect(sent).toBeGreaterThan(0);
      expect(sent).toBeLessThan(DRIP_BYTES / 10);
    } finally {
      for (const t of timers) clearInterval(t);
    }
  });
});
