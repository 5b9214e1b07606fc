// Name resolution for the gate: the host's resolver in production, a fixed table in tests.
import { lookup } from 'node:dns/promises';

/** Resolves a hostname to every address it has (IPv4 and IPv6 text). Rejects when there is none. */
export type Resolver = (name: string) => Promise<string[]>;

/** The host's resolver (getaddrinfo: /etc/hosts, then DNS), all addresses in the order it returns them. */
export const systemResolver: Resolver = async (name) => {
  const rows = await lookup(name, { all: true, verbatim: true });
  return rows.map((r) => r.address);
};

/**
 * A resolver hook for tests: names map to fixed addresses; anything else fails as NXDOMAIN, so a
 * test can never make the gate ask a real DNS server.
 */
export function staticResolver(table: Record<string, readonly string[]>, calls?: string[]): Resolver {
  return async (name) => {
    calls?.push(name);
    const hit = table[name];
    if (!hit || hit.length === 0) {
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
    }
    return [...hit];
  };
}
