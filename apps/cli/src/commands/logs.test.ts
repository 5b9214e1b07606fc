// `grove logs` pages through a trail longer than one read of /api/events, and -n keeps only the newest events.
// The API here is a fake over an array of events: this tests the paging, not the server.
import { describe, expect, it } from 'vitest';
import type { GroveEvent } from '@grove/contracts';
import { ApiError } from '../client.ts';
import type { CliContext } from '../context.ts';
import { EXIT, exitCodeFor } from '../exit.ts';
import { EVENT_PAGE } from '../progress.ts';
import { logs } from './logs.ts';

function trail(n: number): GroveEvent[] {
  return Array.from({ length: n }, (_, i) => ({ id: i + 1, slug: 'demo~a', type: 'egress.denied', at: '2026-01-01T00:00:00.000Z', data: { n: i + 1 } }));
}

function context(events: GroveEvent[], known: string[] = ['demo~a']) {
  const out: string[] = [];
  const err: string[] = [];
  const queries: Array<{ after?: number; limit?: number }> = [];
  const api = {
    events: async ({ query }: { query: { slug?: string; after?: number; limit?: number } }) => {
      queries.push({ after: query.after, limit: query.limit });
      const after = query.after ?? 0;
      return { events: events.filter((e) => e.slug === query.slug && e.id > after).slice(0, Math.min(query.limit ?? 100, EVENT_PAGE)) };
    },
    getWorkspace: async ({ params }: { params: { slug: string } }) => {
      if (!known.includes(params.slug)) throw new ApiError(404, 'not_found', `no workspace "${params.slug}"`);
      return { workspace: { slug: params.slug } };
    },
  };
  const ctx = { api, out: (l: string) => out.push(l), err: (l: string) => err.push(l) } as unknown as CliContext;
  return { ctx, out, err, queries };
}

describe('grove logs', () => {
  it('prints every event of a trail longer than one page, oldest first, in as many reads as it takes', async () => {
    const c = context(trail(EVENT_PAGE * 2 + 5));
    await logs.run(c.ctx, ['demo~a'], {});
    expect(c.out).toHaveLength(EVENT_PAGE * 2 + 5);
    expect(c.out[0]).toBe('2026-01-01T00:00:00.000Z  egress.denied  {"n":1}');
    expect(c.out.at(-1)).toContain(`{"n":${EVENT_PAGE * 2 + 5}}`);
    expect(c.queries.map((q) => q.after)).toEqual([0, EVENT_PAGE, EVENT_PAGE * 2]);
  });

  it('with -n prints only the newest n, across pages; JSON stays one event per line', async () => {
    const c = context(trail(EVENT_PAGE + 3));
    await logs.run(c.ctx, ['demo~a'], { last: 5, json: true });
    expect(c.out.map((l) => (JSON.parse(l) as GroveEvent).id)).toEqual([EVENT_PAGE - 1, EVENT_PAGE, EVENT_PAGE + 1, EVENT_PAGE + 2, EVENT_PAGE + 3]);
  });

  it('prints no C1 control an agent put in event data (JSON escapes only C0 ones)', async () => {
    const c = context([{ id: 1, slug: 'demo~a', type: 'turn.ended', at: '2026-01-01T00:00:00.000Z', data: { error: 'x\u009b2J\u001b[31m' } }]);
    await logs.run(c.ctx, ['demo~a'], {});
    expect(c.out).toEqual(['2026-01-01T00:00:00.000Z  turn.ended  {"error":"x 2J\\u001b[31m"}']);
  });

  it('says on stderr when a workspace has no events yet, and prints nothing on stdout', async () => {
    const c = context(trail(3), ['demo~a', 'demo~other']);
    await logs.run(c.ctx, ['demo~other'], {});
    expect(c.out).toEqual([]);
    expect(c.err).toEqual(['No events for demo~other yet.']);
  });

  it('ends with exit 3 for a slug that is no workspace, also with --follow (which would otherwise wait forever)', async () => {
    for (const follow of [false, true]) {
      const c = context(trail(3));
      const error = await logs.run(c.ctx, ['demo~typo'], { follow }).then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(ApiError);
      expect(exitCodeFor(error)).toBe(EXIT.notFound);
      expect(c.out).toEqual([]);
    }
  });
});
