import {
  getRoutingPolicy,
  listRoutingPolicies,
  policyTargets,
} from '../domain/routing/service.ts';
import { CreateRoutingPolicy, UpdateRoutingPolicy } from '../domain/routing/schema.ts';
import type { RoutingTarget } from '../domain/routing/plan.ts';
import { builder } from './builder.ts';
import { serviceConnection } from './connections.ts';
import { inputTypeFrom, listFilters, serviceInput } from './inputs.ts';
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

const lists = { targets: 'RoutingTargetInput' };
const CreateRoutingPolicyInput = inputTypeFrom('CreateRoutingPolicyInput', CreateRoutingPolicy, { lists });
const UpdateRoutingPolicyInput = inputTypeFrom('UpdateRoutingPolicyInput', UpdateRoutingPolicy, {
  omit: ['project_id'],
  lists,
  description: 'Only the fields given change.',
});

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
        serviceConnection(args, (query) => listRoutingPolicies(ctx, { ...query, ...listFilters(args) })),
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
    resolve: (_root, { input }, { ctx, ports }) => createRoutingPolicy(ports.routing, ctx, serviceInput(input)),
  }),
  updateRoutingPolicy: t.field({
    type: RoutingPolicyRef,
    nullable: true,
    authScopes: { action: 'routing_policy.update' },
    description: 'Audits routing_policy.update and emits policy.updated.',
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateRoutingPolicyInput, required: true }) },
    resolve: (_root, { id, input }, { ctx, ports }) => updateRoutingPolicy(ports.routing, ctx, String(id), serviceInput(input)),
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
