// The gate's decision on one target before anything is connected (steps 1-3 in gate.ts), the re-check of an
// open connection after a policy change, and the audit record each decision ends as.
import type { EgressDecision, EgressPolicy, ErrorCode } from '@grove/contracts';
import { classify, hostPort, parseHost, parseIp, unmap } from './address.ts';
import type { Ip, ParsedHost } from './address.ts';
import { matchAddress, matchName, ruleText } from './policy.ts';
import type { Resolver } from './resolver.ts';

export type Allow = { allow: true; addresses: Ip[]; rule: string; reason: string };
export type Deny = { allow: false; status: number; code: ErrorCode; rule: string; reason: string; address: string | null };
export type Verdict = Allow | Deny;

export function deny(status: number, rule: string, reason: string, address: string | null = null): Deny {
  const code: ErrorCode = status === 429 ? 'egress_limit' : status === 502 ? 'egress_upstream' : 'egress_denied';
  return { allow: false, status, code, rule, reason, address };
}

export function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(t);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}

/** Allow (with the addresses checked, the only ones to connect to) or deny `rawHost:port` under `policy`. */
export async function decide(policy: EgressPolicy, rawHost: string, port: number, o: { resolver: Resolver; resolveTimeoutMs: number }): Promise<Verdict> {
  const h = parseHost(rawHost);
  if (h.kind === 'invalid') return deny(400, 'invalid-target', `invalid host: ${h.why}`);
  if (h.kind === 'ip') {
    const ip = unmap(h.ip);
    const named = matchAddress(policy, ip.text, port);
    if (named.ok) return { allow: true, addresses: [ip], rule: ruleText(named.rule), reason: `${ip.text} is named by a rule` };
    const cls = classify(ip);
    if (cls !== 'public') {
      return deny(403, `blocked-address:${cls}`, `${rawHost} is ${ip.text}, a ${cls} address, and no rule names it on port ${port}`, ip.text);
    }
    if (named.deny === 'port-not-allowed' && named.rule) {
      return deny(403, 'port-not-allowed', `rule ${ruleText(named.rule)} does not allow port ${port}`, ip.text);
    }
    return deny(403, 'not-in-policy', `no rule allows ${hostPort(ip.text, port)}`, ip.text);
  }
  const m = matchName(policy, h.name, port);
  if (!m.ok) {
    if (m.deny === 'port-not-allowed' && m.rule) return deny(403, 'port-not-allowed', `rule ${ruleText(m.rule)} does not allow port ${port}`);
    return deny(403, 'not-in-policy', `no rule allows ${hostPort(h.name, port)}`);
  }
  let answers: string[];
  try {
    answers = await withTimeout(o.resolver(h.name), o.resolveTimeoutMs, `resolving ${h.name}`);
  } catch (e) {
    return deny(502, 'dns-failed', `could not resolve ${h.name}: ${messageOf(e)}`);
  }
  if (answers.length === 0) return deny(502, 'dns-failed', `${h.name} has no addresses`);
  const checked: Ip[] = [];
  // Every answer must pass: a name that resolves to a public and a private address is refused whole,
  // whichever of them a client library would have picked.
  for (const a of answers) {
    const parsed = parseIp(a);
    if (!parsed) return deny(502, 'dns-failed', `the resolver answered "${a}" for ${h.name}, which is not an address`);
    const ip = unmap(parsed);
    const cls = classify(ip);
    if (cls !== 'public' && !matchAddress(policy, ip.text, port).ok) {
      return deny(403, `blocked-address:${cls}`, `${h.name} resolves to ${ip.text}, a ${cls} address, and no rule names it on port ${port}`, ip.text);
    }
    checked.push(ip);
  }
  return { allow: true, addresses: checked, rule: ruleText(m.rule), reason: `${h.name} matches the rule` };
}

/** Re-check an open connection against the current policy (no new lookup: the address it uses is known). */
export function stillAllowed(policy: EgressPolicy, t: { host: ParsedHost; port: number; address: string }): boolean {
  const ip = parseIp(t.address);
  if (!ip) return false;
  const named = matchAddress(policy, ip.text, t.port).ok;
  // An IP literal is only ever allowed by a rule naming the address.
  if (t.host.kind === 'ip') return named;
  if (t.host.kind !== 'name' || !matchName(policy, t.host.name, t.port).ok) return false;
  return classify(ip) === 'public' || named;
}

export interface Outcome {
  method: 'CONNECT' | 'HTTP';
  host: string;
  port: number;
  verdict: Verdict;
  started: number;
  address?: string | null;
  status?: number;
  bytesIn?: number;
  bytesOut?: number;
  error?: string;
}

/** The audit record of one decision, with what the connection it allowed (if any) carried. */
export function auditRecord(slug: string, r: Outcome): EgressDecision {
  const v = r.verdict;
  return {
    slug,
    method: r.method,
    host: r.host.slice(0, 300),
    port: r.port,
    address: r.address ?? (v.allow ? (v.addresses[0]?.text ?? null) : v.address),
    decision: v.allow ? 'allow' : 'deny',
    rule: v.rule,
    reason: v.reason,
    status: r.status ?? (v.allow ? 200 : v.status),
    bytesIn: r.bytesIn ?? 0,
    bytesOut: r.bytesOut ?? 0,
    durationMs: Date.now() - r.started,
    ...(r.error ? { error: r.error } : {}),
  };
}
