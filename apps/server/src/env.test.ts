// GROVE_IDLE_STOP: the duration forms the docs promise, its default, and the ways to turn it off.
import { describe, expect, it } from 'vitest';
import { loadEnv } from './env.ts';

const idle = (v?: string) => loadEnv({ GROVE_HOME: '/tmp/grove-env-test', ...(v === undefined ? {} : { GROVE_IDLE_STOP: v }) }).GROVE_IDLE_STOP;

describe('GROVE_IDLE_STOP', () => {
  it('defaults to 30 minutes', () => {
    expect(idle()).toBe(30 * 60_000);
  });

  it('reads 30m, 90s, 1h, 500ms and bare milliseconds', () => {
    expect(idle('30m')).toBe(1_800_000);
    expect(idle('90s')).toBe(90_000);
    expect(idle('1h')).toBe(3_600_000);
    expect(idle('500ms')).toBe(500);
    expect(idle('2500')).toBe(2500);
  });

  it('is disabled by 0 and off', () => {
    expect(idle('0')).toBe(0);
    expect(idle('OFF')).toBe(0);
  });

  it('refuses anything else, naming the variable', () => {
    expect(() => idle('soon')).toThrow(/GROVE_IDLE_STOP: expected a duration/);
    expect(() => idle('-5m')).toThrow(/GROVE_IDLE_STOP/);
  });
});
