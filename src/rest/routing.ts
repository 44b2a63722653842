import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { RoutingPolicy } from '../generated/prisma/client.ts';
import { unixSeconds } from '../domain/context.ts';
import {
  getRoutingPolicy,
  listRoutingPolicies,
  policyTargets,
} from '../domain/routing/service.ts';
import { CreateRoutingPolicy, ListRoutingPoliciesQuery, PolicyIdParams, UpdateRoutingPolicy } from '../domain/routing/schema.ts';
import { sendList } from './list.ts';
import { createRoutingPolicy, deleteRoutingPolicy, updateRoutingPolicy } from '../domain/governance/guarded.ts';

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

export const routingRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/v1/routing/policies', { schema: { body: CreateRoutingPolicy } }, async (req) =>
    presentRoutingPolicy(await createRoutingPolicy(app.ports.routing, req.ctx, req.body)),
  );

  app.get('/v1/routing/policies', { schema: { querystring: ListRoutingPoliciesQuery } }, async (req, reply) =>
    sendList(reply, await listRoutingPolicies(req.ctx, req.query), '/v1/routing/policies', presentRoutingPolicy),
  );

  app.get('/v1/routing/policies/:policy_id', { schema: { params: PolicyIdParams } }, async (req) =>
    presentRoutingPolicy(await getRoutingPolicy(req.ctx, req.params.policy_id)),
  );

  // Update: POST (Stripe's verb) and PATCH, both partial.
  for (const method of ['POST', 'PATCH'] as const) {
    app.route({
      method,
      url: '/v1/routing/policies/:policy_id',
      schema: { params: PolicyIdParams, body: UpdateRoutingPolicy },
      handler: async (req) => presentRoutingPolicy(await updateRoutingPolicy(app.ports.routing, req.ctx, req.params.policy_id, req.body)),
    });
  }

  app.delete('/v1/routing/policies/:policy_id', { schema: { params: PolicyIdParams } }, async (req) => {
    const policy = await deleteRoutingPolicy(app.ports.routing, req.ctx, req.params.policy_id);
    return { id: policy.id, object: 'svc.routing_policy' as const, policy_id: policy.id, deleted: true };
  });
};
