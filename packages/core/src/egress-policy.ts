/**
 * Each workspace's egress policy: the project default (the server's rules plus the project's), a workspace's
 * own, and changing either, applied at once to the workspace's running gate. The gates themselves are the
 * runtime's (egress.ts); this takes only what applies a policy to one.
 */
import { egressPolicySchema } from '@grove/contracts';
import type { EgressPolicy, EgressResponse, ProjectConfig } from '@grove/contracts';
import type { WorkspaceRow } from '@grove/db';
import { readProjectConfig } from './agents.ts';
import { notFound, requireLive } from './context.ts';
import type { GroveContext } from './context.ts';
import { defaultPolicy as combine } from './egress.ts';
import { LIVE_STATES } from './registry.ts';

/** What a policy change needs of the runtime: apply it to the workspace's gate, answering whether one was running. */
export interface PolicyGates {
  setPolicy(slug: string, policy: EgressPolicy): Promise<boolean>;
}

/**
 * The project default: the server's rules plus the project's own (`egress` in its config). `config`: the one the
 * caller read already; absent, it is read here.
 */
export async function defaultPolicy(ctx: GroveContext, project: string, config?: ProjectConfig): Promise<EgressPolicy> {
  // An unreadable config is refused at fork and start; here it only means "no project rules".
  const c = config ?? (await readProjectConfig(ctx.paths.projectConfig(project)).catch((): ProjectConfig => ({})));
  return combine({ server: ctx.opts.egress?.defaultRules, project: c.egress?.rules });
}

/** The policy a workspace's gate enforces: its own when it has one, else the project default. */
export async function policyOf(ctx: GroveContext, row: WorkspaceRow, config?: ProjectConfig): Promise<EgressPolicy> {
  // Stored rows were validated when written; parsing again keeps a hand-edited database from widening a gate.
  const stored = row.egressPolicy === null ? null : egressPolicySchema.safeParse(row.egressPolicy);
  if (stored?.success) return stored.data;
  if (stored) ctx.log.error({ slug: row.slug }, 'stored egress policy is invalid; using the project default');
  return defaultPolicy(ctx, row.project, config);
}

export async function egress(ctx: GroveContext, slug: string, opts: { limit?: number } = {}): Promise<EgressResponse> {
  const row = await requireLive(ctx, slug);
  const decisions = await ctx.store.recentEvents(slug, ['egress.allowed', 'egress.denied'], Math.min(Math.max(opts.limit ?? 50, 1), 500));
  return { policy: await policyOf(ctx, row), source: row.egressPolicy === null ? 'default' : 'workspace', decisions };
}

/** `policy` as egressPolicySchema parsed it (the server does, from the request body). */
export async function setEgressPolicy(ctx: GroveContext, gates: PolicyGates, slug: string, policy: EgressPolicy): Promise<EgressPolicy> {
  const row = await requireLive(ctx, slug);
  return ctx.slugs.run(slug, async () => {
    const cur = await ctx.store.byId(row.id);
    if (!cur || !(LIVE_STATES as readonly string[]).includes(cur.state)) throw notFound(slug);
    const before = await policyOf(ctx, cur);
    await ctx.store.update(cur.id, { egressPolicy: policy });
    const applied = await gates.setPolicy(slug, policy);
    await ctx.emit(slug, 'egress.policy', { workspaceId: cur.id, before: before.rules, after: policy.rules, applied });
    return policy;
  });
}

/** Back to the project default (which then follows the server's and the project's configuration), applied at once. */
export async function resetEgressPolicy(ctx: GroveContext, gates: PolicyGates, slug: string): Promise<EgressPolicy> {
  const row = await requireLive(ctx, slug);
  return ctx.slugs.run(slug, async () => {
    const cur = await ctx.store.byId(row.id);
    if (!cur || !(LIVE_STATES as readonly string[]).includes(cur.state)) throw notFound(slug);
    const before = await policyOf(ctx, cur);
    const policy = await defaultPolicy(ctx, cur.project);
    await ctx.store.update(cur.id, { egressPolicy: null });
    const applied = await gates.setPolicy(slug, policy);
    await ctx.emit(slug, 'egress.policy', { workspaceId: cur.id, before: before.rules, after: policy.rules, applied, reset: true });
    return policy;
  });
}
