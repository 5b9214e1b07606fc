// The Preview view's choices: which port shows after a read of /ports, and the remembered port as stored.
import { describe, expect, it } from 'vitest';
import { PROVIDER_RELAY_PORT } from '@grove/contracts';
import { decide, listedPorts, parseStoredPort, previewablePorts, storageKey } from './preview.ts';

const port = (n: number, preview = true) => ({ port: n, addresses: ['127.0.0.1'], preview });

describe('previewablePorts', () => {
  it("keeps allowlisted ports in order, never Grove's credential relay", () => {
    const ports = [port(5173), port(22, false), port(PROVIDER_RELAY_PORT), port(3000)];
    expect(previewablePorts(ports)).toEqual([3000, 5173]);
    expect(listedPorts(ports).map((p) => p.port)).toEqual([22, 3000, 5173]);
  });
});

describe('decide', () => {
  it('shows the first previewable port when none was chosen, and says so when none listens', () => {
    expect(decide(null, [])).toEqual({ kind: 'empty' });
    expect(decide(null, [3000, 5173])).toEqual({ kind: 'showing', port: 3000 });
  });

  it('keeps the chosen port while it listens, even when another comes first', () => {
    expect(decide(5173, [3000, 5173])).toEqual({ kind: 'showing', port: 5173 });
  });

  it('says a chosen port went away, offers the others, and shows it again when it is back', () => {
    expect(decide(5173, [3000])).toEqual({ kind: 'gone', port: 5173, others: [3000] });
    expect(decide(5173, [])).toEqual({ kind: 'gone', port: 5173, others: [] });
    expect(decide(5173, [5173])).toEqual({ kind: 'showing', port: 5173 });
  });
});

describe('the remembered port', () => {
  it('is one key per workspace', () => {
    expect(storageKey('demo~a')).not.toBe(storageKey('demo~b'));
  });

  it('reads only a port; anything else is none', () => {
    expect(parseStoredPort('5173')).toBe(5173);
    for (const bad of [null, '', '0', '65536', '05173', '51 73', '-1', '1e3', 'x']) expect(parseStoredPort(bad), String(bad)).toBeNull();
  });
});
