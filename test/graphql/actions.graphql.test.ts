import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACTIONS, allows } from '../../src/domain/auth/actions.ts';
import { schema } from '../../src/graphql/schema.ts';
import { accessOf, missingScope, type RouteAction } from '../../src/api/hooks/auth.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';

// The routes' actions as the routes declare them (config.action), collected by the app at ready.
let t: TestApp;
let ROUTE_ACTIONS: Record<string, RouteAction>;
beforeAll(async () => {
  t = await buildTestApp();
  ROUTE_ACTIONS = Object.fromEntries(t.app.routeActions);
});
afterAll(() => t.close());
const accessFor = (route: string) => accessOf(ROUTE_ACTIONS[route]!);

/** The action a GraphQL field names in its authScopes, or null. */
function fieldAction(typeName: string, fieldName: string): string | null {
  const type = schema.getType(typeName) as { getFields(): Record<string, { extensions: Record<string, unknown> }> };
  const options = type.getFields()[fieldName]!.extensions.pothosOptions as { authScopes?: { action?: string } };
  return options.authScopes?.action ?? null;
}

// Each REST route and its GraphQL twin: both must name the same action, so they need the same scopes.
const TWINS: [route: string, type: string, field: string][] = [
  ['POST /v1/projects', 'Mutation', 'createProject'],
  ['GET /v1/projects', 'Query', 'projects'],
  ['GET /v1/projects/:project_id', 'Query', 'project'],
  ['POST /v1/projects/:project_id/archive', 'Mutation', 'archiveProject'],
  ['POST /v1/keys', 'Mutation', 'createKey'],
  ['GET /v1/keys', 'Query', 'keys'],
  ['GET /v1/keys/:key_id', 'Query', 'key'],
  ['POST /v1/keys/:key_id/rotate', 'Mutation', 'rotateKey'],
  ['POST /v1/keys/:key_id/revoke', 'Mutation', 'revokeKey'],
  ['GET /v1/audit/events', 'Query', 'auditEvents'],
  ['GET /v1/audit/events', 'Query', 'auditActions'],
  ['PUT /v1/projects/:project_id/rate-limits', 'Mutation', 'updateRateLimits'],
  ['GET /v1/projects/:project_id/rate-limits', 'Query', 'rateLimits'],
  ['PUT /v1/projects/:project_id/budget', 'Mutation', 'updateBudget'],
  ['GET /v1/projects/:project_id/budget', 'Query', 'budget'],
  ['POST /v1/webhooks', 'Mutation', 'createWebhook'],
  ['GET /v1/webhooks', 'Query', 'webhooks'],
  ['GET /v1/webhooks/:webhook_id', 'Query', 'webhook'],
  ['POST /v1/webhooks/:webhook_id/disable', 'Mutation', 'disableWebhook'],
  ['GET /v1/webhooks/:webhook_id/deliveries', 'Webhook', 'deliveries'],
  ['POST /v1/webhooks/:webhook_id/deliveries/:delivery_id/replay', 'Mutation', 'replayDelivery'],
  ['GET /v1/usage', 'Query', 'usage'],
  ['GET /v1/usage', 'Query', 'usageByDay'],
  ['POST /v1/routing/policies', 'Mutation', 'createRoutingPolicy'],
  ['GET /v1/routing/policies', 'Query', 'routingPolicies'],
  ['GET /v1/routing/policies/:policy_id', 'Query', 'routingPolicy'],
  ['PATCH /v1/routing/policies/:policy_id', 'Mutation', 'updateRoutingPolicy'],
  ['DELETE /v1/routing/policies/:policy_id', 'Mutation', 'deleteRoutingPolicy'],
  ['GET /v1/operator-groups', 'Query', 'operatorGroups'],
  // The Operators screen's reads: the operator key's, like the groups (domain/operators/directory.ts).
  ['GET /v1/operator-groups', 'Query', 'operators'],
  ['GET /v1/operator-groups', 'Query', 'signInSettings'],
  ['PUT /v1/operator-groups/:group_id/roles', 'Mutation', 'setOperatorGroupRoles'],
  ['GET /v1/projects/:project_id/ip-allowlist', 'Query', 'projectIpAllowlist'],
  ['PUT /v1/projects/:project_id/ip-allowlist', 'Mutation', 'setProjectIpAllowlist'],
];

describe('one action table for both surfaces', () => {
  it('gives every root field but viewer an action of the table', () => {
    for (const type of [schema.getQueryType()!, schema.getMutationType()!]) {
      for (const name of Object.keys(type.getFields())) {
        if (name === 'viewer') continue;
        const action = fieldAction(type.name, name);
        expect({ field: `${type.name}.${name}`, known: action !== null && action in ACTIONS }).toEqual({
          field: `${type.name}.${name}`,
          known: true,
        });
      }
    }
  });

  it('names the same action for a REST route and its GraphQL twin', () => {
    for (const [route, type, field] of TWINS) {
      expect({ route, field, action: fieldAction(type, field) }).toEqual({ route, field, action: ROUTE_ACTIONS[route] });
    }
  });

  it('maps every /v1 route to an action of the table', () => {
    for (const [route, action] of Object.entries(ROUTE_ACTIONS).filter(([r]) => r.includes(' /v1/'))) {
      expect({ route, known: action in ACTIONS }).toEqual({ route, known: true });
    }
  });

  it('lets either governance:manage or inference:write read routing policies, and names both when refusing', () => {
    expect(allows('routing_policy.read', ['inference:write'])).toBe(true);
    expect(allows('routing_policy.read', ['governance:manage'])).toBe(true);
    expect(allows('routing_policy.read', ['usage:read'])).toBe(false);
    expect(allows('routing_policy.update', ['inference:write'])).toBe(false);
    const access = accessFor('GET /v1/routing/policies');
    expect(missingScope(access, ['inference:write'])).toBeNull();
    expect(missingScope(access, ['usage:read'])).toBe('governance:manage or inference:write');
    // A single scope stays a plain string: the rate limiter compares it with the caller's scopes.
    expect(accessFor('POST /v1/inference')).toBe('inference:write');
    expect(accessFor('POST /v1/projects')).toBe('authenticated');
  });
});
