// The hub's side of the egress floor (DESIGN.md section 6): which rules a workspace's gate starts from. The gates
// themselves are the runtime's (@grove/runtime); core only decides and stores the policy and hands it over.
import { egressPolicySchema } from '@grove/contracts';
import type { EgressPolicy, EgressPolicyInput } from '@grove/contracts';

export interface EgressOptions {
  /** Rules every workspace's default policy starts from (the project default). Default: none. */
  defaultRules?: EgressPolicyInput['rules'];
}

/**
 * The project default: the server's rules plus the project's. No agent provider adds a rule of its
 * own: `claude` reaches its API through the credential relay, which adds the key on the host. A gate
 * rule for api.anthropic.com would let a sandbox talk to the provider with a key of its own, a way
 * to carry the worktree out that the relay's audit would never see (docs/security.md).
 */
export function defaultPolicy(o: { server?: EgressPolicyInput['rules']; project?: EgressPolicyInput['rules'] }): EgressPolicy {
  const rules = [...(o.server ?? []), ...(o.project ?? [])];
  // Both sides name the same host sometimes; one rule each keeps the policy under the rule limit.
  const seen = new Set<string>();
  const unique = rules.filter((r) => {
    const key = JSON.stringify(r);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  return egressPolicySchema.parse({ rules: unique });
}
