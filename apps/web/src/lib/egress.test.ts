import { describe, expect, it } from 'vitest';
import type { GroveEvent } from '@grove/contracts';
import { changesEgress, networkLine, recentDenials } from './egress.ts';

const decision = (id: number, type: GroveEvent['type'], over: Record<string, unknown> = {}): GroveEvent => ({
  id,
  slug: 'demo~a',
  type,
  at: `2026-01-01T00:00:0${id}.000Z`,
  data: { method: 'CONNECT', host: '127.0.0.1', port: 80, address: '127.0.0.1', decision: 'deny', rule: 'blocked-address:loopback', reason: 'loopback', status: 403, bytesIn: 0, bytesOut: 0, durationMs: 1, ...over },
});

describe('egress on the card', () => {
  it('shows "none" for an empty policy, up to three rules, and counts the rest', () => {
    expect(networkLine({ rules: [] })).toEqual({ text: 'none', all: '' });
    expect(networkLine({ rules: [{ host: 'api.anthropic.com', ports: [443] }] })).toEqual({ text: 'api.anthropic.com:443', all: '' });
    const many = networkLine({
      rules: [
        { host: 'a.example', ports: [443] },
        { host: '*.b.example', ports: [80, 443] },
        { host: '2001:db8::1', ports: [22] },
        { host: 'd.example', ports: [443] },
      ],
    });
    expect(many.text).toBe('a.example:443, *.b.example:80,443, [2001:db8::1]:22 +1 more');
    expect(many.all.split('\n')).toHaveLength(4);
  });

  it('lists the newest denials only, with host:port, rule and the folded count; allowed and unreadable ones are skipped', () => {
    const list = recentDenials([
      decision(6, 'egress.denied', { host: 'evil.example', port: 443, rule: 'not-in-policy', count: 7 }),
      decision(5, 'egress.allowed', { decision: 'allow', rule: 'a.example:443' }),
      decision(4, 'egress.denied', { host: 'fd00::1' }),
      decision(3, 'egress.denied', { port: 'x' }),
      decision(2, 'egress.denied'),
      decision(1, 'egress.denied'),
    ]);
    expect(list.map((d) => [d.id, d.target, d.rule, d.count])).toEqual([
      [6, 'evil.example:443', 'not-in-policy', 7],
      [4, '[fd00::1]:80', 'blocked-address:loopback', 1],
      [2, '127.0.0.1:80', 'blocked-address:loopback', 1],
    ]);
  });

  it('reads again on a denial or a policy change of its own workspace only', () => {
    expect(changesEgress('demo~a', decision(1, 'egress.denied'))).toBe(true);
    expect(changesEgress('demo~a', { ...decision(1, 'egress.policy'), data: {} })).toBe(true);
    expect(changesEgress('demo~a', decision(1, 'egress.allowed'))).toBe(false);
    expect(changesEgress('demo~b', decision(1, 'egress.denied'))).toBe(false);
  });
});
