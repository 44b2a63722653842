import type { FastifyPluginAsync } from 'fastify';
import type { RoutingPolicy } from '../generated/prisma/client.ts';
import { unixSeconds } from '../domain/context.ts';
import {
  getRoutingPolicy,
  listRoutingPolicies,
  policyTargets,
  type RoutingPolicyInput,
  type RoutingPolicyQuery,
} from '../domain/routing/service.ts';
import { pageQueryProperties, sendList } from './list.ts';
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

const PolicyIdParams = { type: 'object', properties: { policy_id: { type: 'string' } }, required: ['policy_id'] } as const;

const policyProperties = {
  project_id: { type: ['string', 'null'] },
  name: { type: 'string' },
  strategy: { type: 'string' },
  // Items are checked by the service, so that errors name `targets[i].model`.
  targets: { type: 'array' },
  cache_ttl_s: { type: ['integer', 'null'] },
  is_default: { type: ['boolean', 'null'] },
} as const;

export const routingRoutes: FastifyPluginAsync = async (app) => {
  app.post<{ Body: RoutingPolicyInput }>(
    '/v1/routing/policies',
    {
      schema: {
        body: { type: 'object', additionalProperties: false, required: ['name', 'strategy', 'targets'], properties: policyProperties },
      },
    },
    async (req) => presentRoutingPolicy(await createRoutingPolicy(app.ports.routing, req.ctx, req.body)),
  );

  app.get<{ Querystring: RoutingPolicyQuery }>(
    '/v1/routing/policies',
    {
      schema: {
        querystring: { type: 'object', additionalProperties: false, properties: { ...pageQueryProperties, project_id: { type: 'string' } } },
      },
    },
    async (req, reply) =>
      sendList(reply, await listRoutingPolicies(req.ctx, req.query), '/v1/routing/policies', presentRoutingPolicy),
  );

  app.get<{ Params: { policy_id: string } }>('/v1/routing/policies/:policy_id', { schema: { params: PolicyIdParams } }, async (req) =>
    presentRoutingPolicy(await getRoutingPolicy(req.ctx, req.params.policy_id)),
  );

  // Update: POST (Stripe's verb) and PATCH, both partial.
  for (const method of ['POST', 'PATCH'] as const) {
    app.route<{ Params: { policy_id: string }; Body: RoutingPolicyInput }>({
      method,
      url: '/v1/routing/policies/:policy_id',
      schema: { params: PolicyIdParams, body: { type: 'object', additionalProperties: false, properties: policyProperties } },
      handler: async (req) => presentRoutingPolicy(await updateRoutingPolicy(app.ports.routing, req.ctx, req.params.policy_id, req.body ?? {})),
    });
  }

  app.delete<{ Params: { policy_id: string } }>('/v1/routing/policies/:policy_id', { schema: { params: PolicyIdParams } }, async (req) => {
    const policy = await deleteRoutingPolicy(app.ports.routing, req.ctx, req.params.policy_id);
    return { id: policy.id, object: 'svc.routing_policy' as const, policy_id: policy.id, deleted: true };
  });
};
