// What a workspace card shows of its egress: the allowed hosts in one line, and its latest denials.
import { egressDecisionSchema, formatEgressRule } from '@grove/contracts';
import type { EgressPolicy, GroveEvent } from '@grove/contracts';

/** Hosts named in the line itself; the rest are counted ("+2 more") and listed in its title. */
export const NETWORK_HOSTS_SHOWN = 3;
export const DENIALS_SHOWN = 3;

export interface NetworkLine {
  /** "api.anthropic.com:443, *.npmjs.org:443" or "none". */
  text: string;
  /** Every rule, one per line, for the title; empty when the line already shows them all. */
  all: string;
}

export function networkLine(policy: EgressPolicy): NetworkLine {
  const rules = policy.rules.map(formatEgressRule);
  if (rules.length === 0) return { text: 'none', all: '' };
  const shown = rules.slice(0, NETWORK_HOSTS_SHOWN).join(', ');
  const more = rules.length - NETWORK_HOSTS_SHOWN;
  return more > 0 ? { text: `${shown} +${more} more`, all: rules.join('\n') } : { text: shown, all: '' };
}

export interface Denial {
  id: number;
  /** host:port as the sandbox asked for it. */
  target: string;
  /** Which deny rule refused it: not-in-policy, port-not-allowed, blocked-address:loopback, ... */
  rule: string;
  reason: string;
  at: string;
  /** Attempts this entry stands for (the audit folds repeats into one summary event). */
  count: number;
}

const decisionData = egressDecisionSchema.omit({ slug: true });

/** The newest `max` denials among the decisions (newest first, as GET /egress answers them); unreadable ones are skipped. */
export function recentDenials(decisions: GroveEvent[], max = DENIALS_SHOWN): Denial[] {
  const out: Denial[] = [];
  for (const e of decisions) {
    if (out.length >= max) break;
    if (e.type !== 'egress.denied') continue;
    const d = decisionData.safeParse(e.data);
    if (!d.success) continue;
    const host = d.data.host.includes(':') ? `[${d.data.host}]` : d.data.host;
    out.push({ id: e.id, target: `${host}:${d.data.port}`, rule: d.data.rule, reason: d.data.reason, at: e.at, count: d.data.count ?? 1 });
  }
  return out;
}

/** Events after which a card reads its egress again (never on a timer). */
export function changesEgress(slug: string, e: GroveEvent): boolean {
  return e.slug === slug && (e.type === 'egress.denied' || e.type === 'egress.policy');
}
