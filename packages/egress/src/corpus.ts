// The SSRF corpus (ssrf-corpus.json) as typed data, with the requests a client sends for each case.
// Test support: used by the gate tests here and by e2e/egress.test.ts; not exported from index.ts.
import { readFileSync } from 'node:fs';
import { egressPolicySchema } from '@grove/contracts';
import type { EgressPolicy } from '@grove/contracts';

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
  note?: string;
}

export interface Corpus {
  policy: EgressPolicy;
  resolver: Record<string, string[]>;
  cases: CorpusCase[];
}

interface RawCorpus {
  policy: { rules: Array<{ host: string; ports: Array<number | string> }> };
  resolver: Record<string, string[]>;
  cases: CorpusCase[];
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
  return { policy, resolver: raw.resolver, cases };
}

/** The bytes a client sends for a case. Allowed CONNECTs are followed by `TUNNEL_REQUEST` once the tunnel is up. */
export function requestText(r: CorpusRequest): string {
  if (r.kind === 'raw') return r.text;
  if (r.kind === 'connect') return `CONNECT ${r.target} HTTP/1.1\r\nHost: ${r.target}\r\n\r\n`;
  const authority = r.url.replace(/^[a-z]+:\/\//i, '').split(/[/?#]/, 1)[0] ?? '';
  return `GET ${r.url} HTTP/1.1\r\nHost: ${r.host ?? authority}\r\nConnection: close\r\n\r\n`;
}

export const TUNNEL_REQUEST = 'GET /through-tunnel HTTP/1.1\r\nHost: upstream.test\r\nConnection: close\r\n\r\n';
