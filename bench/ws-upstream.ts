// Child process for bench/ws.ts: a WebSocket server on a Unix socket that streams 100-byte frames stamped with the monotonic clock.
// Per connection, ?mode=flood keeps at most ?window unacknowledged frames in flight (the client acks with its
// running count), ?mode=paced sends ?rate frames per second; both until the client closes.
import fs from 'node:fs';
import http from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';

const socketPath = process.argv[2];
if (!socketPath) throw new Error('usage: ws-upstream.ts <socket>');

const FRAME_BYTES = 100;
const PREFIX = '{"type":"delta","turn":"bench","text":"';
const SUFFIX = '"}';

/** A stream frame shaped like the backend's delta frames, padded to exactly 100 bytes; the text starts with hrtime in ns. */
function frame(): string {
  const ts = process.hrtime.bigint().toString();
  const pad = FRAME_BYTES - PREFIX.length - SUFFIX.length - ts.length - 1;
  return `${PREFIX}${ts}:${'x'.repeat(pad)}${SUFFIX}`;
}

interface Paced {
  ws: WebSocket;
  rate: number;
  start: bigint;
  sent: number;
}
const paced = new Set<Paced>();

// One scheduler for every paced stream: each tick sends whatever is due, so a stream's frames are spread out
// rather than sent in bursts, and the stamp is taken at send time (timer jitter is not counted as latency).
function tick(): void {
  const now = process.hrtime.bigint();
  for (const p of paced) {
    const due = Math.floor((Number(now - p.start) / 1e9) * p.rate);
    while (p.sent < due) {
      p.ws.send(frame());
      p.sent++;
    }
  }
  if (paced.size) setTimeout(tick, 1);
}

const wss = new WebSocketServer({ noServer: true, clientTracking: false });
const server = http.createServer((_req, res) => {
  res.writeHead(404).end();
});
server.on('upgrade', (req, socket, head) => {
  wss.handleUpgrade(req, socket, head, (ws) => {
    const q = new URL(req.url ?? '/', 'http://bench').searchParams;
    if (q.get('mode') === 'paced') {
      const p: Paced = { ws, rate: Number(q.get('rate') ?? 100), start: process.hrtime.bigint(), sent: 0 };
      if (paced.size === 0) setTimeout(tick, 1);
      paced.add(p);
      ws.on('close', () => paced.delete(p));
      return;
    }
    const window = Number(q.get('window') ?? 64);
    let sent = 0;
    let acked = 0;
    let open = true;
    const pump = () => {
      while (open && sent - acked < window) {
        ws.send(frame());
        sent++;
      }
    };
    ws.on('message', (m) => {
      acked = Number(String(m));
      pump();
    });
    ws.on('close', () => (open = false));
    pump();
  });
});
fs.rmSync(socketPath, { force: true });
server.listen(socketPath, () => process.stdout.write(`${JSON.stringify({ ready: true })}\n`));
