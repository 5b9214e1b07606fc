// Test helper: what the sandbox's backend sends on the workspace's host.sock. Sent from the host side of the
// socket, as the backend does (the agent is never its client), so tests drive the after-turn hook without a sandbox.
import { request } from 'node:http';
import { join } from 'node:path';

export interface HostSockReply {
  status: number;
  text: string;
}

/** POST /turn-ended with `body` (a turnEndedRequestSchema report, or a malformed one) for workspace `slug` under `home`. */
export function postTurnEnded(home: string, slug: string, body: unknown): Promise<HostSockReply> {
  const json = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath: join(home, 'run', slug, 'host.sock'),
        path: '/turn-ended',
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString('utf8')));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(json);
  });
}
