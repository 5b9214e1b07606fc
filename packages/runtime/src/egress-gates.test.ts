// The gates' audit folding: a budget of decisions per window per workspace, the rest folded into summaries.
import type { EgressDecision } from '@grove/contracts';
import { describe, expect, it, vi } from 'vitest';
import { EgressAudit } from './egress-gates.ts';

describe('EgressAudit', () => {
  const d = (over: Partial<EgressDecision> = {}): EgressDecision => ({
    slug: 'demo',
    method: 'CONNECT',
    host: '10.0.0.1',
    port: 80,
    address: '10.0.0.1',
    decision: 'deny',
    rule: 'blocked-address:private',
    reason: 'r',
    status: 403,
    bytesIn: 0,
    bytesOut: 0,
    durationMs: 1,
    ...over,
  });

  it('writes a budget of decisions per window, folds the rest into one summary per host and rule', () => {
    vi.useFakeTimers();
    try {
      const written: Array<{ type: string; data: Record<string, unknown> }> = [];
      const audit = new EgressAudit((_slug, type, data) => written.push({ type, data }), { windowMs: 1_000, allowedPerWindow: 2, deniedPerWindow: 3 });
      for (let i = 0; i < 10; i++) audit.record(d());
      for (let i = 0; i < 5; i++) audit.record(d({ decision: 'allow', rule: 'a.example:443', host: 'a.example', bytesIn: 10, bytesOut: 5, status: 200 }));
      expect(written).toHaveLength(5);
      vi.advanceTimersByTime(1_000);
      expect(written).toHaveLength(7);
      expect(written[5]).toMatchObject({ type: 'egress.denied', data: { count: 7, rule: 'blocked-address:private' } });
      expect(written[6]).toMatchObject({ type: 'egress.allowed', data: { count: 3, bytesIn: 30, bytesOut: 15 } });
      // A new window starts with a fresh budget.
      audit.record(d());
      expect(written).toHaveLength(8);
    } finally {
      vi.useRealTimers();
    }
  });
});
