import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { RoutingPolicy } from '../../generated/prisma/client.ts';
import { unixSeconds } from '../../domain/context.ts';
import {
  getRoutingPolicy,
  listRoutingPolicies,
  policyTargets,
} from '../../domain/routing/service.ts';
import { CreateRoutingPolicy, ListRoutingPoliciesQuery, PolicyIdParams, UpdateRoutingPolicy } from '../../domain/routing/schema.ts';
import { Nullable } from '../../domain/schema.ts';
import { ListOf, sendList } from '../list.ts';
import { NullableStr, Unix } from '../response-fields.ts';
import { createRoutingPolicy, deleteRoutingPolicy, updateRoutingPolicy } from '../../domain/governance/guarded.ts';

/** The routing policy object (its fields are not shown by the spec; `policy_id` is the list's cursor field, spec 4.5). */
export function presentRoutingPolicy(p: RoutingPolicy) {
  return {
    id: p.id,
    object: 'svc.routing_policy' as const,
    policy_id: p.id,
    project_id: p.projectId,
    name: p.name,
    strategy: p.strategy,
    targets: policyTargets(p).map((t) => ({ provider: t.provider, model: t.model, weight: t.weight })),
    cache_ttl_s: p.cacheTtlS,
    is_default: p.isDefault,
    created_at: unixSeconds(p.createdAt),
    updated_at: unixSeconds(p.updatedAt),
  };
}

/** presentRoutingPolicy's answer. */
export const RoutingPolicyObject = Type.Object(
  {
    id: Type.String({ description: 'The policy id (pol_…).' }),
    object: Type.Literal('svc.routing_policy'),
    policy_id: Type.String({ description: 'The policy id again: the list\'s cursor field.' }),
    project_id: Type.String({ description: 'The project (prj_…).' }),
    name: Type.String({ description: 'The policy\'s name.' }),
    strategy: Type.String({ description: 'ordered, cheapest or weighted.' }),
    targets: Type.Array(
      Type.Object({
        provider: NullableStr('The provider that must serve the model, or null: any.'),
        model: Type.String({ description: 'The model id.' }),
        weight: Type.Number({ description: 'The target\'s share with strategy weighted.' }),
      }),
      { description: 'The targets, in order.' },
    ),
    cache_ttl_s: Nullable(Type.Integer(), { description: 'How long answers are cached, in seconds, or null: no caching.' }),
    is_default: Type.Boolean({ description: 'Whether the policy applies when a request names none.' }),
    created_at: Unix('When the policy was created'),
    updated_at: Unix('When the policy was last changed'),
  },
  { description: 'A routing policy.' },
);

/** The answer to a delete. */
const DeletedRoutingPolicy = Type.Object(
  {
    id: Type.String({ description: 'The deleted policy\'s id.' }),
    object: Type.Literal('svc.routing_policy'),
    policy_id: Type.String({ description: 'The deleted policy\'s id again.' }),
    deleted: Type.Boolean({ description: 'Always true.' }),
  },
  { description: 'A deleted routing policy.' },
);

export const routingRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/v1/routing/policies', { config: { action: 'routing_policy.create' }, schema: { body: CreateRoutingPolicy, response: { 200: RoutingPolicyObject } } }, async (req) =>
    presentRoutingPolicy(await createRoutingPolicy(app.ports.routing, req.ctx, req.body)),
  );

  app.get('/v1/routing/policies', { config: { action: 'routing_policy.read' }, schema: { querystring: ListRoutingPoliciesQuery, response: { 200: ListOf(RoutingPolicyObject) } } }, async (req, reply) =>
    sendList(reply, await listRoutingPolicies(req.ctx, req.query), '/v1/routing/policies', presentRoutingPolicy),
  );

  app.get('/v1/routing/policies/:policy_id', { config: { action: 'routing_policy.read' }, schema: { params: PolicyIdParams, response: { 200: RoutingPolicyObject } } }, async (req) =>
    presentRoutingPolicy(await getRoutingPolicy(req.ctx, req.params.policy_id)),
  );

  // Update: POST (Stripe's verb) and PATCH, both partial.
  for (const method of ['POST', 'PATCH'] as const) {
    app.route({
      method,
      url: '/v1/routing/policies/:policy_id',
      config: { action: 'routing_policy.update' },
      schema: { params: PolicyIdParams, body: UpdateRoutingPolicy, response: { 200: RoutingPolicyObject } },
      handler: async (req) => presentRoutingPolicy(await updateRoutingPolicy(app.ports.routing, req.ctx, req.params.policy_id, req.body)),
    });
  }

  app.delete('/v1/routing/policies/:policy_id', { config: { action: 'routing_policy.delete' }, schema: { params: PolicyIdParams, response: { 200: DeletedRoutingPolicy } } }, async (req) => {
    const policy = await deleteRoutingPolicy(app.ports.routing, req.ctx, req.params.policy_id);
    return { id: policy.id, object: 'svc.routing_policy' as const, policy_id: policy.id, deleted: true };
  });
};
