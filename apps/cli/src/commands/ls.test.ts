// `grove ls` says the dashboard's meter in words: running of the cap, starting, waiting in line, warm.
// The API here is a fake answering one list: this tests the wording, not the server.
import { describe, expect, it } from 'vitest';
import type { Capacity, ListWorkspacesResponse } from '@grove/contracts';
import type { CliContext } from '../context.ts';
import { ls } from './ls.ts';

async function summary(capacity: Capacity): Promise<string | undefined> {
  const out: string[] = [];
  const list: ListWorkspacesResponse = { workspaces: [], capacity };
  const ctx = { api: { listWorkspaces: async () => list }, out: (l: string) => out.push(l) } as unknown as CliContext;
  await ls.run(ctx, [], {});
  return out.at(-1);
}

describe('grove ls', () => {
  it('names warm sandboxes after the rest, and leaves out every figure that is zero', async () => {
    expect(await summary({ running: 1, creating: 0, cap: 8, queued: 0, warm: 1 })).toBe('\n1 / 8 sandboxes running, 1 warm');
    expect(await summary({ running: 3, creating: 1, cap: 4, queued: 2, warm: 0 })).toBe('\n3 / 4 sandboxes running (1 starting), 2 waiting in line');
    // An older server sends no warm figure at all.
    expect(await summary({ running: 0, creating: 0, cap: 8, queued: 0 })).toBe('\n0 / 8 sandboxes running');
  });
});
