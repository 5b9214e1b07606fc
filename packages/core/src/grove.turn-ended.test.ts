// The turn.ended event through createGrove: the real host.sock hook, real git, a real SQLite file, an in-memory
// sandbox driver. The backend's report (contracts' turnEndedRequestSchema) becomes one registry event per turn.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TURN_ERROR_SHORT_MAX, shortTurnError, turnEndedDataSchema } from '@grove/contracts';
import type { Grove } from './index.ts';
import { useGroveFixture } from './test-support/grove-fixture.ts';
import { postTurnEnded as report } from './test-support/host-sock.ts';

const fx = useGroveFixture({
  tmpPrefix: 'grove-turn-ended-',
  logLevel: process.env.GROVE_TEST_LOG,
  defaults: { maxRunning: 3, gitLockTimeoutMs: 5_000 },
});
async function setup(): Promise<{ grove: Grove; home: string; slug: string; worktree: string }> {
  const grove = await fx.withProject();
  const { slug } = await grove.fork({ project: 'demo', name: 'w' });
  return { grove, home: fx.home, slug, worktree: join(fx.home, 'worktrees', 'demo', 'w') };
}

async function ended(grove: Grove, slug: string) {
  const events = await grove.events({ slug, type: 'turn.ended' });
  return events.map((e) => turnEndedDataSchema.parse(e.data));
}

describe('turn.ended', () => {
  it('records each outcome, the failed turn’s short error and whether the agent waits, after the snapshot', async () => {
    const { grove, home, slug, worktree } = await setup();
    const seen: string[] = [];
    const off = grove.onEvent((e) => {
      if (e.slug === slug && e.type.startsWith('turn.')) seen.push(e.type);
    });

    writeFileSync(join(worktree, 'notes.txt'), 'hello\n');
    expect((await report(home, slug, { turn: 'turn-1', status: 'completed', waitingForUser: true })).status).toBe(200);
    const long = `Scripted failure, as requested.\nsecond line ${'x'.repeat(400)}`;
    expect((await report(home, slug, { turn: 'turn-2', status: 'failed', error: long, waitingForUser: false })).status).toBe(200);
    expect((await report(home, slug, { turn: 'turn-3', status: 'cancelled', error: 'ignored: not a failure' })).status).toBe(200);
    const longLine = 'y'.repeat(500);
    expect((await report(home, slug, { turn: 'turn-4', status: 'failed', error: longLine })).status).toBe(200);
    off();

    expect(await ended(grove, slug)).toEqual([
      { turn: 'turn-1', outcome: 'completed', error: null, waitingForUser: true, shutdown: false },
      { turn: 'turn-2', outcome: 'failed', error: 'Scripted failure, as requested.', waitingForUser: false, shutdown: false },
      { turn: 'turn-3', outcome: 'cancelled', error: null, waitingForUser: false, shutdown: false },
      { turn: 'turn-4', outcome: 'failed', error: `${'y'.repeat(TURN_ERROR_SHORT_MAX - 1)}…`, waitingForUser: false, shutdown: false },
    ]);
    // The snapshot of turn 1 is written before its end, so "finished" means its changes are recorded.
    expect(seen.slice(0, 2)).toEqual(['turn.snapshot', 'turn.ended']);
  });

  it('fills in what an older backend does not send, and records a turn cut by a stop without after-turn work', async () => {
    const { grove, home, slug, worktree } = await setup();
    // An older image reports only turn and status: a completed turn then means the agent waits.
    expect((await report(home, slug, { turn: 'turn-1', status: 'completed' })).status).toBe(200);
    expect((await report(home, slug, { turn: 'turn-2', status: 'failed' })).status).toBe(200);
    writeFileSync(join(worktree, 'cut.txt'), 'half done\n');
    const cut = await report(home, slug, { turn: 'turn-3', status: 'cancelled', shutdown: true, waitingForUser: false });
    expect(cut.status).toBe(200);
    expect(JSON.parse(cut.text)).toEqual({ events: [] });

    expect(await ended(grove, slug)).toEqual([
      { turn: 'turn-1', outcome: 'completed', error: null, waitingForUser: true, shutdown: false },
      { turn: 'turn-2', outcome: 'failed', error: null, waitingForUser: false, shutdown: false },
      { turn: 'turn-3', outcome: 'cancelled', error: null, waitingForUser: false, shutdown: true },
    ]);
    // No snapshot for the cut turn: the stop does not wait for one.
    expect((await grove.events({ slug, type: 'turn.snapshot' })).length).toBe(0);
  });

  it('refuses a report that does not match the contract, and records nothing for it', async () => {
    const { grove, home, slug } = await setup();
    for (const body of [
      { turn: 'turn-1', status: 'done' },
      { turn: 'turn-1', status: 'failed', error: 'e'.repeat(5000) },
      { turn: 'turn-1', status: 'completed', waitingForUser: 'yes' },
      { turn: 'turn-1', status: 'completed', extra: 1 },
    ]) {
      expect((await report(home, slug, body)).status, JSON.stringify(body).slice(0, 80)).toBe(422);
    }
    // A well-formed report of a turn id that is not turn-<n> is refused by core (host.sock answers its code with 500).
    const odd = await report(home, slug, { turn: '../x', status: 'completed' });
    expect(odd.status).toBe(500);
    expect(JSON.parse(odd.text)).toMatchObject({ code: 'invalid_input' });
    expect(await ended(grove, slug)).toEqual([]);
  });
});

describe('shortTurnError', () => {
  it('keeps the first non-empty line, without control characters, cut with an ellipsis', () => {
    expect(shortTurnError('\n\n  boom: it broke  \nstack…')).toBe('boom: it broke');
    expect(shortTurnError('a\u0007b\u001b[31mc')).toBe('a b [31mc');
    // C1 controls too (U+009B is CSI to a terminal that reads 8-bit controls).
    expect(shortTurnError('a\u009b2Jb\u0085c')).toBe('a 2Jb c');
    expect(shortTurnError('')).toBe('');
    expect([...shortTurnError('é'.repeat(1000))]).toHaveLength(TURN_ERROR_SHORT_MAX);
  });
});
