import type { Prisma, RoutingPolicy } from '../../generated/prisma/client.ts';
import type { Tx } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import type { RoutingTarget } from './plan.ts';
import { recordAudit } from '../audit/service.ts';
import { ownTransaction, addressed, requireProjectId, visibleProjectId, type Ctx, type Checked } from '../context.ts';
import type { ProviderCatalog, RoutingPorts } from './ports.ts';
import { enqueueEvent } from '../events/outbox.ts';
import { paginate, type Page } from '../pagination.ts';
import { parseInput } from '../validation.ts';
import { CreateRoutingPolicy, ListRoutingPoliciesQuery, UpdateRoutingPolicy } from './schema.ts';

const notFound = () => new SvcError('not_found', { param: 'policy_id', message: 'No such routing policy.' });

/** Reading policies: keys that route inference or manage governance (the operator holds both). */
function assertCanRead(ctx: Ctx): void {
  const s = ctx.caller.scopes;
  if (!s.includes('governance:manage') && !s.includes('inference:write')) {
    throw new SvcError('insufficient_scope', { message: 'Reading routing policies requires governance:manage or inference:write.' });
  }
}

export const policyTargets = (p: RoutingPolicy): RoutingTarget[] => p.targets as unknown as RoutingTarget[];

type TargetInput = NonNullable<UpdateRoutingPolicy['targets']>[number];

/** What the schema cannot say: each target names a configured model, and a provider that serves it. */
function resolveTargets(registry: ProviderCatalog, targets: readonly TargetInput[]): RoutingTarget[] {
  return targets.map((t, i): RoutingTarget => {
    const at = `targets[${i}]`;
    if (!registry.isKnownModel(t.model)) throw invalid(`${at}.model`, `${at}.model must be a configured model id (GET /v1/models).`);
    const provider = t.provider ?? null;
    if (provider !== null && !registry.findRoute(provider, t.model)) {
      throw invalid(`${at}.provider`, `${at}.provider must name a configured provider that serves ${t.model}.`);
    }
    return { provider, model: t.model, weight: t.weight ?? 1 };
  });
}

/** policy.updated data (CONTRACT §6): which policy kind, what happened, and the new values. */
function eventData(action: 'created' | 'updated' | 'deleted', p: RoutingPolicy): Prisma.InputJsonObject {
  return {
    policy: 'routing',
    action,
    policy_id: p.id,
    name: p.name,
    strategy: p.strategy,
    targets: p.targets as Prisma.InputJsonArray,
    cache_ttl_s: p.cacheTtlS,
    is_default: p.isDefault,
  };
}

/** Only one default per project: `model: "auto"` uses it. */
async function clearOtherDefaults(tx: Tx, projectId: string, keepId: string): Promise<void> {
  await tx.routingPolicy.updateMany({ where: { projectId, isDefault: true, NOT: { id: keepId } }, data: { isDefault: false } });
}

export interface NewRoutingPolicy extends Checked {
  input: CreateRoutingPolicy;
  targets: RoutingTarget[];
}

/** createRoutingPolicy's validation (the input, its targets against the catalog, the project), writing nothing. */
export async function checkCreateRoutingPolicy(ports: RoutingPorts, ctx: Ctx, raw: unknown): Promise<NewRoutingPolicy> {
  const input = parseInput(CreateRoutingPolicy, raw);
  const targets = resolveTargets(ports.providers, input.targets);
  const projectId = await requireProjectId(ctx, input.project_id);
  return { projectId, input, targets };
}

/** createRoutingPolicy's change, as checkCreateRoutingPolicy validated it. */
export async function applyCreateRoutingPolicy(ports: RoutingPorts, ctx: Ctx, checked: NewRoutingPolicy, transact = ownTransaction(ctx)): Promise<RoutingPolicy> {
  const { projectId, input, targets } = checked;
  const { name, strategy } = input;
  const cacheTtlS = input.cache_ttl_s ?? null;
  const now = ctx.now();
  const created = await transact(async (tx) => {
    const isDefault = input.is_default ?? (await tx.routingPolicy.count({ where: { projectId, isDefault: true } })) === 0;
    const policy = await tx.routingPolicy.create({
      data: {
        id: newId('pol', now.getTime()),
        projectId,
        name,
        strategy,
        targets: targets as unknown as Prisma.InputJsonArray,
        cacheTtlS,
        isDefault,
        createdAt: now,
        updatedAt: now,
      },
    });
    if (isDefault) await clearOtherDefaults(tx, projectId, policy.id);
    await recordAudit(tx, ctx, 'routing_policy.create', { projectId, targetId: policy.id, data: eventData('created', policy) });
    await enqueueEvent(tx, now, projectId, 'policy.updated', eventData('created', policy));
    return policy;
  });
  await policiesChanged(ports, projectId);
  return created;
}

/**
 * Audits routing_policy.create and emits policy.updated. `is_default` omitted: the policy becomes the default when the
 * project has none yet, so the first policy takes effect for `model: "auto"` at once.
 */
export async function createRoutingPolicy(ports: RoutingPorts, ctx: Ctx, raw: unknown): Promise<RoutingPolicy> {
  return applyCreateRoutingPolicy(ports, ctx, await checkCreateRoutingPolicy(ports, ctx, raw));
}

/** After commit, before answering: `model: "auto"` on every replica routes by the new policies (project cache). */
async function policiesChanged(ports: RoutingPorts, projectId: string): Promise<void> {
  await ports.projects.invalidate(projectId);
}

export async function listRoutingPolicies(ctx: Ctx, raw: unknown): Promise<Page<RoutingPolicy>> {
  const query = parseInput(ListRoutingPoliciesQuery, raw);
  assertCanRead(ctx);
  const projectId = await visibleProjectId(ctx, query.project_id);
  const where: Prisma.RoutingPolicyWhereInput = projectId !== undefined ? { projectId } : {};
  return paginate(query, {
    cursorField: 'policy_id',
    fetch: ({ cursor, order, take }) =>
      ctx.db.routingPolicy.findMany({ where: { ...where, ...(cursor ? { id: cursor } : {}) }, orderBy: { id: order }, take }),
    exists: async (id) => (await ctx.db.routingPolicy.count({ where: { ...where, id } })) > 0,
  });
}

/**
 * Another project's policy, or one outside the project the call names, looks absent. `projectId` is
 * visibleProjectId's answer, resolved before any transaction (PGlite has one connection).
 */
async function findVisible(ctx: Ctx, tx: Tx, policyId: string, projectId: string | undefined): Promise<RoutingPolicy> {
  const policy = await tx.routingPolicy.findUnique({ where: { id: policyId } });
  if (!policy || (projectId !== undefined && policy.projectId !== projectId)) throw notFound();
  addressed(ctx, policy.projectId);
  return policy;
}

export async function getRoutingPolicy(ctx: Ctx, policyId: string): Promise<RoutingPolicy> {
  assertCanRead(ctx);
  return findVisible(ctx, ctx.db, policyId, await visibleProjectId(ctx, null));
}

export interface RoutingPolicyChange extends Checked {
  policyId: string;
  /** visibleProjectId's answer: the policy must (still) be in it when the change is applied. */
  visible: string | undefined;
  data: Prisma.RoutingPolicyUpdateInput;
}

/** updateRoutingPolicy's validation (the input, its targets, that the policy is visible), writing nothing. */
export async function checkUpdateRoutingPolicy(ports: RoutingPorts, ctx: Ctx, policyId: string, raw: unknown): Promise<RoutingPolicyChange> {
  const input = parseInput(UpdateRoutingPolicy, raw);
  const data: Prisma.RoutingPolicyUpdateInput = {};
  if (input.name !== undefined) data.name = input.name;
  if (input.strategy !== undefined) data.strategy = input.strategy;
  if (input.targets !== undefined) data.targets = resolveTargets(ports.providers, input.targets) as unknown as Prisma.InputJsonArray;
  if (input.cache_ttl_s !== undefined) data.cacheTtlS = input.cache_ttl_s;
  if (input.is_default !== undefined && input.is_default !== null) data.isDefault = input.is_default;
  const visible = await visibleProjectId(ctx, input.project_id);
  const found = await findVisible(ctx, ctx.db, policyId, visible);
  return { projectId: found.projectId, policyId, visible, data };
}

/** updateRoutingPolicy's change, as checkUpdateRoutingPolicy validated it. */
export async function applyUpdateRoutingPolicy(ports: RoutingPorts, ctx: Ctx, change: RoutingPolicyChange, transact = ownTransaction(ctx)): Promise<RoutingPolicy> {
  const now = ctx.now();
  const updated = await transact(async (tx) => {
    const found = await findVisible(ctx, tx, change.policyId, change.visible);
    const policy = await tx.routingPolicy.update({ where: { id: found.id }, data: { ...change.data, updatedAt: now } });
    if (policy.isDefault) await clearOtherDefaults(tx, policy.projectId, policy.id);
    await recordAudit(tx, ctx, 'routing_policy.update', { projectId: policy.projectId, targetId: policy.id, data: eventData('updated', policy) });
    await enqueueEvent(tx, now, policy.projectId, 'policy.updated', eventData('updated', policy));
    return policy;
  });
  await policiesChanged(ports, updated.projectId);
  return updated;
}

/** Partial update; audits routing_policy.update and emits policy.updated with the new values. */
export async function updateRoutingPolicy(ports: RoutingPorts, ctx: Ctx, policyId: string, raw: unknown): Promise<RoutingPolicy> {
  return applyUpdateRoutingPolicy(ports, ctx, await checkUpdateRoutingPolicy(ports, ctx, policyId, raw));
}

export interface RoutingPolicyDeletion extends Checked {
  policyId: string;
  visible: string | undefined;
}

/** deleteRoutingPolicy's validation (the policy is visible), writing nothing. */
export async function checkDeleteRoutingPolicy(_ports: RoutingPorts, ctx: Ctx, policyId: string): Promise<RoutingPolicyDeletion> {
  const visible = await visibleProjectId(ctx, null);
  const found = await findVisible(ctx, ctx.db, policyId, visible);
  return { projectId: found.projectId, policyId, visible };
}

/** deleteRoutingPolicy's change, as checkDeleteRoutingPolicy validated it. */
export async function applyDeleteRoutingPolicy(ports: RoutingPorts, ctx: Ctx, deletion: RoutingPolicyDeletion, transact = ownTransaction(ctx)): Promise<RoutingPolicy> {
  const now = ctx.now();
  const deleted = await transact(async (tx) => {
    const policy = await findVisible(ctx, tx, deletion.policyId, deletion.visible);
    await tx.routingPolicy.delete({ where: { id: policy.id } });
    await recordAudit(tx, ctx, 'routing_policy.delete', { projectId: policy.projectId, targetId: policy.id });
    await enqueueEvent(tx, now, policy.projectId, 'policy.updated', eventData('deleted', policy));
    return policy;
  });
  await policiesChanged(ports, deleted.projectId);
  return deleted;
}

/** Deleting the default policy sends `model: "auto"` back to the built-in cheapest-first routing. */
export async function deleteRoutingPolicy(ports: RoutingPorts, ctx: Ctx, policyId: string): Promise<RoutingPolicy> {
  return applyDeleteRoutingPolicy(ports, ctx, await checkDeleteRoutingPolicy(ports, ctx, policyId));
}
