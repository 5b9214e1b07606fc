// Matching requests against a workspace's egress policy. Rules arrive canonical (egressPolicySchema).
import { formatEgressRule } from '@grove/contracts';
import type { EgressPolicy, EgressRule } from '@grove/contracts';

export type NameMatch = { ok: true; rule: EgressRule } | { ok: false; deny: 'not-in-policy' | 'port-not-allowed'; rule?: EgressRule };

function isIpRule(r: EgressRule): boolean {
  return r.host.includes(':') || /^\d+\.\d+\.\d+\.\d+$/.test(r.host);
}

function nameMatches(ruleHost: string, name: string): boolean {
  if (ruleHost.startsWith('*.')) return name.endsWith(ruleHost.slice(1)) && name.length > ruleHost.length - 1;
  return ruleHost === name;
}

/** The first rule whose hostname (exact or *.suffix) and port match; else why not. IP rules never match names. */
export function matchName(policy: EgressPolicy, name: string, port: number): NameMatch {
  let hostOnly: EgressRule | undefined;
  for (const r of policy.rules) {
    if (isIpRule(r) || !nameMatches(r.host, name)) continue;
    if (r.ports.includes(port)) return { ok: true, rule: r };
    hostOnly ??= r;
  }
  return hostOnly ? { ok: false, deny: 'port-not-allowed', rule: hostOnly } : { ok: false, deny: 'not-in-policy' };
}

/** The rule that names this address (canonical text) on this port: how a private address is allowed on purpose. */
export function matchAddress(policy: EgressPolicy, address: string, port: number): NameMatch {
  let hostOnly: EgressRule | undefined;
  for (const r of policy.rules) {
    if (r.host !== address) continue;
    if (r.ports.includes(port)) return { ok: true, rule: r };
    hostOnly ??= r;
  }
  return hostOnly ? { ok: false, deny: 'port-not-allowed', rule: hostOnly } : { ok: false, deny: 'not-in-policy' };
}

export { formatEgressRule as ruleText };
