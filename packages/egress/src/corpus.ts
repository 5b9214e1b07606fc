// The SSRF corpus (ssrf-corpus.json) as typed data, with the requests a client sends for each case.
// Test support: used by the gate tests here and by e2e/egress.test.ts; not exported from index.ts.
import { readFileSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { egressPolicySchema } from '@grove/contracts';
import type { EgressPolicy } from '@grove/contracts';
import { isLoopback, parseIp } from './address.ts';
import type { ConnectTarget, Connector } from './gate.ts';
import { staticResolver } from './resolver.ts';
import type { Resolver } from './resolver.ts';

export type CorpusRequest =
  | { kind: 'connect'; target: string }
  | { kind: 'http'; url: string; host?: string }
  | { kind: 'raw'; text: string };

export interface CorpusCase {
  id: string;
  request: CorpusRequest;
  expect: 'allow' | 'deny';
  /** The deny rule (`blocked-address:loopback`, ...) or, for allow cases, the policy rule shown in the audit. */
  rule: string;
  status?: number;
  /** Allow cases: the address the gate must connect to (and audit). Default 127.0.0.1. */
  address?: string;
  note?: string;
}

export interface Corpus {
  policy: EgressPolicy;
  resolver: Record<string, string[]>;
  /** Names whose answer changes between lookups: the nth lookup gets the nth answer, the last one from then on. */
  resolverSequences: Record<string, string[][]>;
  /** Public addresses a test connector never dials: it carries a connection to one of them to the loopback address given. */
  publicStandIns: Record<string, string>;
  cases: CorpusCase[];
}

interface RawCorpus {
  policy: { rules: Array<{ host: string; ports: Array<number | string> }> };
  resolver: Record<string, string[]>;
  resolverSequences: Record<string, string[][] | string>;
  publicStandIns: Record<string, string>;
  cases: CorpusCase[];
}

/** The JSON's own keys without its `$comment`. */
function entries<T>(o: Record<string, T | string>): Array<[string, T]> {
  return Object.entries(o).filter((e): e is [string, T] => !e[0].startsWith('$'));
}

/** The corpus with `$UP` replaced by the test upstream's port. */
export function loadCorpus(upstreamPort: number): Corpus {
  const raw = JSON.parse(readFileSync(new URL('./ssrf-corpus.json', import.meta.url), 'utf8')) as RawCorpus;
  const up = String(upstreamPort);
  const sub = (s: string): string => s.replaceAll('$UP', up);
  const policy = egressPolicySchema.parse({
    rules: raw.policy.rules.map((r) => ({ host: r.host, ports: r.ports.map((p) => (p === '$UP' ? upstreamPort : Number(p))) })),
  });
  const cases = raw.cases.map((c): CorpusCase => {
    const r = c.request;
    const request: CorpusRequest =
      r.kind === 'connect'
        ? { kind: 'connect', target: sub(r.target) }
        : r.kind === 'http'
          ? { kind: 'http', url: sub(r.url), ...(r.host === undefined ? {} : { host: sub(r.host) }) }
          : { kind: 'raw', text: sub(r.text) };
    return { ...c, request, rule: sub(c.rule) };
  });
  return {
    policy,
    resolver: raw.resolver,
    resolverSequences: Object.fromEntries(entries<string[][]>(raw.resolverSequences)),
    publicStandIns: Object.fromEntries(entries<string>(raw.publicStandIns)),
    cases,
  };
}

/**
 * The corpus's resolver hook, with its own count of lookups (one per gate): every name it is asked
 * for is pushed to `calls`, so a test can count lookups per name. A name with a sequence gets its
 * next answer on every call; the rest come from the fixed table, unknown names fail as NXDOMAIN.
 */
export function corpusResolver(corpus: Corpus, calls: string[] = []): Resolver {
  const fixed = staticResolver(corpus.resolver);
  return async (name) => {
    calls.push(name);
    const seq = corpus.resolverSequences[name];
    if (!seq || seq.length === 0) return fixed(name);
    const nth = calls.filter((c) => c === name).length - 1;
    return [...(seq[Math.min(nth, seq.length - 1)] ?? [])];
  };
}

/**
 * A connector that can put no packet on any address but loopback: every target is pushed to `log`
 * as the gate asked for it; a public stand-in is carried to its loopback address instead; any other
 * non-loopback target is pushed to `violations` and refused without a packet.
 */
export function loopbackConnector(o: { corpus: Corpus; log: ConnectTarget[]; violations: ConnectTarget[] }): Connector {
  return (t) => {
    o.log.push(t);
    const stand = o.corpus.publicStandIns[t.address];
    const dial = stand ?? t.address;
    const ip = parseIp(dial);
    if (!ip || !isLoopback(ip)) {
      o.violations.push(t);
      throw new Error(`test connector refused non-loopback ${dial}`);
    }
    return netConnect({ host: dial, port: t.port });
  };
}

/** The bytes a client sends for a case. Allowed CONNECTs are followed by `TUNNEL_REQUEST` once the tunnel is up. */
export function requestText(r: CorpusRequest): string {
  if (r.kind === 'raw') return r.text;
  if (r.kind === 'connect') return `CONNECT ${r.target} HTTP/1.1\r\nHost: ${r.target}\r\n\r\n`;
  const authority = r.url.replace(/^[a-z]+:\/\//i, '').split(/[/?#]/, 1)[0] ?? '';
  return `GET ${r.url} HTTP/1.1\r\nHost: ${r.host ?? authority}\r\nConnection: close\r\n\r\n`;
}

export const TUNNEL_REQUEST = 'GET /through-tunnel HTTP/1.1\r\nHost: upstream.test\r\nConnection: close\r\n\r\n';
