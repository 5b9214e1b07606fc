import { request } from 'node:http';
import { turnEndedResponseSchema } from '@grove/contracts';
import type { GroveThreadEvent, TurnEndedRequest } from '@grove/contracts';

/**
 * Tells the host that a turn's agent is done and waits for its after-turn work (allowed-paths
 * reverts, the snapshot) while the workspace still counts as busy. See contracts/src/turns.ts.
 */
export type HookOutcome =
  /** No host listens there (tests, a backend run by hand): nothing to record. */
  | { kind: 'absent' }
  | { kind: 'done'; events: GroveThreadEvent[] }
  /** The host was expected but did not answer properly; the turn's changes stay unchecked. */
  | { kind: 'failed'; message: string };

export const DEFAULT_HOOK_TIMEOUT_MS = 60_000;

export function notifyTurnEnded(args: { socketPath: string; body: TurnEndedRequest; timeoutMs?: number }): Promise<HookOutcome> {
  const payload = JSON.stringify(args.body);
  const timeoutMs = args.timeoutMs ?? DEFAULT_HOOK_TIMEOUT_MS;
  return new Promise((resolve) => {
    let done = false;
    const settle = (outcome: HookOutcome): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(outcome);
    };
    const req = request(
      {
        socketPath: args.socketPath,
        method: 'POST',
        path: '/turn-ended',
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (err) => settle({ kind: 'failed', message: err.message }));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200) {
            settle({ kind: 'failed', message: `the host answered ${res.statusCode ?? '?'}: ${text.slice(0, 500)}` });
            return;
          }
          try {
            const parsed = turnEndedResponseSchema.safeParse(JSON.parse(text));
            settle(parsed.success ? { kind: 'done', events: parsed.data.events } : { kind: 'failed', message: `the host's answer does not match the contract: ${parsed.error.message}` });
          } catch {
            settle({ kind: 'failed', message: 'the host answered with something that is not JSON' });
          }
        });
      },
    );
    const timer = setTimeout(() => {
      req.destroy();
      settle({ kind: 'failed', message: `the host did not answer within ${timeoutMs} ms` });
    }, timeoutMs);
    req.on('error', (err: NodeJS.ErrnoException) => {
      settle(err.code === 'ENOENT' ? { kind: 'absent' } : { kind: 'failed', message: `${err.code ?? err.message} on ${args.socketPath}` });
    });
    req.end(payload);
  });
}
