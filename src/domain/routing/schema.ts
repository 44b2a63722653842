import { Type, type Static } from 'typebox';
import { says } from '../../config/schema-errors.ts';
import type { RoutingStrategy } from './plan.ts';
import { MAX_CACHE_TTL_S } from '../inference/cache.ts';
import { pageQueryProperties } from '../pagination.ts';
import { Input, Name, Nullable, PathId, ProjectIdField, ProjectIdFilter } from '../schema.ts';

export const STRATEGIES = ['ordered', 'cheapest', 'weighted'] as const satisfies readonly RoutingStrategy[];
export const MAX_TARGETS = 20;

const TARGET_SHAPE = '{model, provider?, weight?}';

/** One target; the service checks besides that the model is configured and the provider serves it. */
const RoutingTarget = Type.Object(
  {
    model: Type.String({ description: 'A configured model id (GET /v1/models).', ...says('must be a configured model id (GET /v1/models)') }),
    provider: Type.Optional(
      Nullable(Type.String(), {
        description: 'The provider that must serve the model; null or absent: any provider serving it.',
        ...says('must name a configured provider that serves the model'),
      }),
    ),
    weight: Type.Optional(
      Nullable(Type.Integer({ minimum: 1, maximum: 1000 }), {
        description: 'The share of requests with strategy weighted, 1 to 1000 (default 1).',
        ...says('must be an integer from 1 to 1000'),
      }),
    ),
  },
  { additionalProperties: false, ...says({ type: `must be an object ${TARGET_SHAPE}` }) },
);

const policyProperties = {
  project_id: ProjectIdField,
  name: Name('The policy\'s name, 1 to 100 characters.'),
  strategy: Type.Enum(STRATEGIES, {
    description: 'ordered (first target first), cheapest, or weighted (by weight).',
    ...says('must be one of ordered, cheapest, weighted'),
  }),
  targets: Type.Array(RoutingTarget, {
    minItems: 1,
    maxItems: MAX_TARGETS,
    description: `1 to ${MAX_TARGETS} targets, tried in the strategy's order with fallback.`,
    ...says({
      type: `must be an array of 1 to ${MAX_TARGETS} ${TARGET_SHAPE} objects`,
      minItems: `must be an array of 1 to ${MAX_TARGETS} ${TARGET_SHAPE} objects`,
      maxItems: `must be an array of 1 to ${MAX_TARGETS} ${TARGET_SHAPE} objects`,
    }),
  }),
  cache_ttl_s: Type.Optional(
    Nullable(Type.Integer({ minimum: 1, maximum: MAX_CACHE_TTL_S }), {
      description: `Seconds an answer is cached for identical requests, 1 to ${MAX_CACHE_TTL_S}; null: no cache.`,
      ...says(`must be null or whole seconds from 1 to ${MAX_CACHE_TTL_S}`),
    }),
  ),
  is_default: Type.Optional(
    Nullable(Type.Boolean(), {
      description: 'The policy model "auto" uses. Omitted on create: the default when the project has none yet.',
      ...says('must be true or false'),
    }),
  ),
};

/** POST /v1/routing/policies, GraphQL createRoutingPolicy. */
export const CreateRoutingPolicy = Input(policyProperties);
export type CreateRoutingPolicy = Static<typeof CreateRoutingPolicy>;

/** POST or PATCH /v1/routing/policies/{policy_id}, GraphQL updateRoutingPolicy: only the fields given change. */
export const UpdateRoutingPolicy = Input({
  project_id: policyProperties.project_id,
  name: Type.Optional(policyProperties.name),
  strategy: Type.Optional(policyProperties.strategy),
  targets: Type.Optional(policyProperties.targets),
  cache_ttl_s: policyProperties.cache_ttl_s,
  is_default: policyProperties.is_default,
});
export type UpdateRoutingPolicy = Static<typeof UpdateRoutingPolicy>;

/** GET /v1/routing/policies, GraphQL routingPolicies. */
export const ListRoutingPoliciesQuery = Input({ ...pageQueryProperties(), project_id: ProjectIdFilter });

export const PolicyIdParams = PathId('policy_id', 'The routing policy\'s id (pol_…).');
