import {
  getRoutingPolicy,
  listRoutingPolicies,
  policyTargets,
  type RoutingPolicyInput,
} from '../domain/routing/service.ts';
import type { RoutingTarget } from '../providers/router.ts';
import { builder } from './builder.ts';
import { serviceConnection } from './connections.ts';
import { createRoutingPolicy, deleteRoutingPolicy, updateRoutingPolicy } from '../domain/governance/guarded.ts';

const RoutingTargetRef = builder.objectRef<RoutingTarget>('RoutingTarget').implement({
  fields: (t) => ({
    provider: t.exposeString('provider', { nullable: true, description: 'null: any provider serving the model.' }),
    model: t.exposeString('model'),
    weight: t.exposeInt('weight'),
  }),
});

export const RoutingPolicyRef = builder.prismaObject('RoutingPolicy', {
  fields: (t) => ({
    id: t.exposeID('id'),
    projectId: t.exposeID('projectId'),
    name: t.exposeString('name'),
    strategy: t.exposeString('strategy', { description: 'ordered, cheapest or weighted.' }),
    targets: t.field({ type: [RoutingTargetRef], resolve: (p) => policyTargets(p) }),
    cacheTtlS: t.exposeInt('cacheTtlS', { nullable: true }),
    isDefault: t.exposeBoolean('isDefault', { description: 'The policy model "auto" uses.' }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    updatedAt: t.expose('updatedAt', { type: 'UnixSeconds' }),
  }),
});

const RoutingTargetInput = builder.inputType('RoutingTargetInput', {
  fields: (t) => ({ model: t.string({ required: true }), provider: t.string(), weight: t.int() }),
});

const CreateRoutingPolicyInput = builder.inputType('CreateRoutingPolicyInput', {
  fields: (t) => ({
    projectId: t.id({ description: 'Else the X-Svc-Project header; missing: missing_project_id.' }),
    name: t.string({ required: true }),
    strategy: t.string({ required: true }),
    targets: t.field({ type: [RoutingTargetInput], required: true }),
    cacheTtlS: t.int(),
    isDefault: t.boolean({ description: 'Omitted: the default when the project has none yet.' }),
  }),
});

const UpdateRoutingPolicyInput = builder.inputType('UpdateRoutingPolicyInput', {
  description: 'Only the fields given change.',
  fields: (t) => ({
    name: t.string(),
    strategy: t.string(),
    targets: t.field({ type: [RoutingTargetInput] }),
    cacheTtlS: t.int({ description: 'null removes the cache TTL.' }),
    isDefault: t.boolean(),
  }),
});

type PolicyFields = {
  projectId?: string | number | null;
  name?: string | null;
  strategy?: string | null;
  targets?: { model: string; provider?: string | null; weight?: number | null }[] | null;
  cacheTtlS?: number | null;
  isDefault?: boolean | null;
};

/** GraphQL input to the service's (REST's) names; fields not given stay undefined, so an update leaves them alone. */
function policyInput(input: PolicyFields): RoutingPolicyInput {
  return {
    ...('projectId' in input ? { project_id: input.projectId === null ? null : String(input.projectId) } : {}),
    // An explicit null is passed on: the service refuses it (400 naming the field), as REST does.
    ...('name' in input ? { name: input.name } : {}),
    ...('strategy' in input ? { strategy: input.strategy } : {}),
    ...('targets' in input ? { targets: input.targets } : {}),
    ...('cacheTtlS' in input ? { cache_ttl_s: input.cacheTtlS } : {}),
    ...('isDefault' in input ? { is_default: input.isDefault } : {}),
  };
}

const DeletedRoutingPolicy = builder.objectRef<{ id: string }>('DeletedRoutingPolicy').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    deleted: t.boolean({ resolve: () => true }),
  }),
});

builder.queryFields((t) => ({
  routingPolicies: t.connection(
    {
      type: RoutingPolicyRef,
      nullable: true,
      authScopes: { action: 'routing_policy.read' },
      description: 'Newest first (cursor: the policy id).',
      args: { projectId: t.arg.id() },
      resolve: (_root, args, { ctx }) =>
        serviceConnection(args, (query) =>
          listRoutingPolicies(ctx, { ...query, ...(args.projectId ? { project_id: String(args.projectId) } : {}) }),
        ),
    },
    { name: 'RoutingPolicyConnection' },
    { name: 'RoutingPolicyEdge' },
  ),
  routingPolicy: t.field({
    type: RoutingPolicyRef,
    nullable: true,
    authScopes: { action: 'routing_policy.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getRoutingPolicy(ctx, String(args.id)),
  }),
}));

builder.mutationFields((t) => ({
  createRoutingPolicy: t.field({
    type: RoutingPolicyRef,
    nullable: true,
    authScopes: { action: 'routing_policy.create' },
    description: 'Audits routing_policy.create and emits policy.updated.',
    args: { input: t.arg({ type: CreateRoutingPolicyInput, required: true }) },
    resolve: (_root, { input }, { ctx, ports }) => createRoutingPolicy(ports.routing, ctx, policyInput(input)),
  }),
  updateRoutingPolicy: t.field({
    type: RoutingPolicyRef,
    nullable: true,
    authScopes: { action: 'routing_policy.update' },
    description: 'Audits routing_policy.update and emits policy.updated.',
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateRoutingPolicyInput, required: true }) },
    resolve: (_root, { id, input }, { ctx, ports }) => updateRoutingPolicy(ports.routing, ctx, String(id), policyInput(input)),
  }),
  deleteRoutingPolicy: t.field({
    type: DeletedRoutingPolicy,
    nullable: true,
    authScopes: { action: 'routing_policy.delete' },
    description: 'Deleting the default policy sends model "auto" back to cheapest-first routing. Emits policy.updated.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx, ports }) => deleteRoutingPolicy(ports.routing, ctx, String(args.id)),
  }),
}));
