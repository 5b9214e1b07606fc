import { z } from 'zod';
import { eventSchema } from './workspace.ts';

/**
 * Egress policy of a workspace (DESIGN.md section 6): the hosts a sandbox may reach through its gate.
 * A rule names a hostname (`api.example.com`), every subdomain of a suffix (`*.example.com`, not the
 * apex itself), or an IP address (`203.0.113.7`, `2001:db8::1`), together with the ports allowed.
 * An IP rule is also how a private or loopback address is allowed on purpose: the gate refuses such
 * addresses unless a rule names them.
 *
 * Browser-safe on purpose (the dashboard validates with it): no node: imports; IPv6 is checked and
 * canonicalised by the WHATWG URL parser, which every runtime has.
 */

const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;
const DOTTED_QUAD = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
/** Parts that the URL standard (and so curl and browsers) read as an IPv4 number: 127.1, 0x7f000001, 0177.0.0.1. */
const NUMERIC_LAST_LABEL = /^(\d+|0x[0-9a-f]*)$/;
export const EGRESS_MAX_RULES = 200;
export const EGRESS_MAX_PORTS_PER_RULE = 32;

function canonicalIpv6(text: string): string | null {
  if (!/^[0-9a-f:.]+$/.test(text)) return null;
  try {
    const host = new URL(`http://[${text}]/`).hostname;
    return host.slice(1, -1);
  } catch {
    return null;
  }
}

/** Canonical form of a rule host, or the reason it is not one. Shared with the gate (same answers on both sides). */
export function canonicalRuleHost(input: string): { host: string } | { error: string } {
  let h = input.trim().toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (h.includes(':')) {
    if (h.includes('%')) return { error: 'IPv6 zone ids (%eth0) are not allowed' };
    const v6 = canonicalIpv6(h);
    if (!v6) return { error: `"${input}" is not a valid IPv6 address` };
    // The URL serializer writes the embedded IPv4 part in hex: ::ffff:7f00:1, ::7f00:1.
    if (/^::(ffff:)?[0-9a-f]{1,4}:[0-9a-f]{1,4}$/.test(v6)) {
      return { error: `"${input}" is an IPv4-mapped or IPv4-compatible address; write the IPv4 address itself` };
    }
    return { host: v6 };
  }
  if (h.endsWith('.')) h = h.slice(0, -1);
  if (h.length === 0) return { error: 'host must not be empty' };
  if (h.length > 253) return { error: 'host must be at most 253 characters' };
  const wildcard = h.startsWith('*.');
  const name = wildcard ? h.slice(2) : h;
  if (name.includes('*')) return { error: 'a wildcard is only allowed as the whole first label, as in *.example.com' };
  const labels = name.split('.');
  const last = labels[labels.length - 1] ?? '';
  if (NUMERIC_LAST_LABEL.test(last)) {
    if (wildcard) return { error: 'a wildcard rule must name a domain, not an IP address' };
    if (DOTTED_QUAD.test(name)) return { host: name };
    return { error: `"${input}" looks like an IP address; write it as four decimal numbers a.b.c.d without leading zeros` };
  }
  for (const l of labels) {
    if (!LABEL.test(l)) {
      return { error: `"${input}" is not a hostname: each dot-separated label is 1-63 of a-z, 0-9, "-" and "_", not starting or ending with "-"` };
    }
  }
  if (wildcard && labels.length < 2) return { error: 'a wildcard needs a suffix of at least two labels (*.example.com, not *.com)' };
  return { host: h };
}

export const egressHostSchema = z
  .string({ error: 'host must be a string' })
  .max(300, { error: 'host must be at most 253 characters' })
  .transform((v, ctx) => {
    const r = canonicalRuleHost(v);
    if ('error' in r) {
      ctx.issues.push({ code: 'custom', message: r.error, input: v });
      return z.NEVER;
    }
    return r.host;
  });

export const egressPortSchema = z
  .number({ error: 'port must be a number' })
  .int({ error: 'port must be a whole number' })
  .min(1, { error: 'port must be between 1 and 65535' })
  .max(65535, { error: 'port must be between 1 and 65535' });

export const egressRuleSchema = z
  .object({
    host: egressHostSchema,
    ports: z
      .array(egressPortSchema)
      .min(1, { error: 'ports must list at least one port' })
      .max(EGRESS_MAX_PORTS_PER_RULE, { error: `ports must list at most ${EGRESS_MAX_PORTS_PER_RULE} ports` })
      .transform((ps) => [...new Set(ps)].sort((a, b) => a - b)),
  })
  .strict();
export type EgressRule = z.output<typeof egressRuleSchema>;

export const egressPolicySchema = z
  .object({
    rules: z.array(egressRuleSchema).max(EGRESS_MAX_RULES, { error: `a policy has at most ${EGRESS_MAX_RULES} rules` }),
  })
  .strict();
export type EgressPolicy = z.output<typeof egressPolicySchema>;
export type EgressPolicyInput = z.input<typeof egressPolicySchema>;

/** How a rule is shown in denials and audit records: `host:port,port`. */
export function formatEgressRule(r: EgressRule): string {
  const host = r.host.includes(':') ? `[${r.host}]` : r.host;
  return `${host}:${r.ports.join(',')}`;
}

/**
 * Why the gate refused. `blocked-address:<class>` carries the address class (loopback, private,
 * link-local, metadata, cgnat, unique-local, multicast, unspecified, reserved, ipv4-compatible).
 */
export const egressDenyRules = [
  'invalid-target',
  'not-in-policy',
  'port-not-allowed',
  'blocked-address',
  'host-header-mismatch',
  'dns-failed',
  'tunnel-limit',
] as const;
export type EgressDenyRule = (typeof egressDenyRules)[number];

/** One decision of a gate, as written to the audit trail (`egress.allowed` / `egress.denied` event data). */
export const egressDecisionSchema = z.object({
  slug: z.string(),
  method: z.enum(['CONNECT', 'HTTP']),
  host: z.string(),
  port: z.number().int(),
  /** The address the gate checked and connected to (null when it was denied before resolving). */
  address: z.string().nullable(),
  decision: z.enum(['allow', 'deny']),
  /** The policy rule that allowed it, or the deny rule (`not-in-policy`, `blocked-address:loopback`, ...). */
  rule: z.string(),
  reason: z.string(),
  /** Status the gate answered (200 for an established tunnel). */
  status: z.number().int(),
  bytesIn: z.number().int().nonnegative(),
  bytesOut: z.number().int().nonnegative(),
  durationMs: z.number().nonnegative(),
  /** Set when an allowed connection failed (upstream unreachable, timeout). */
  error: z.string().optional(),
  /** Set on a summary event: how many decisions it stands for (the audit trail rate-limits per workspace). */
  count: z.number().int().positive().optional(),
});
export type EgressDecision = z.infer<typeof egressDecisionSchema>;

export const egressResponseSchema = z.object({
  policy: egressPolicySchema,
  /** `default`: the project default (follows the server's configuration); `workspace`: set through PUT. */
  source: z.enum(['default', 'workspace']),
  /** Newest first: the latest egress.allowed / egress.denied events of the workspace. */
  decisions: z.array(eventSchema),
});
export type EgressResponse = z.infer<typeof egressResponseSchema>;

/** DELETE /api/workspaces/:slug/egress: the workspace is back on the project default, which this is. */
export const egressResetResponseSchema = egressResponseSchema.pick({ policy: true, source: true });
export type EgressResetResponse = z.infer<typeof egressResetResponseSchema>;
