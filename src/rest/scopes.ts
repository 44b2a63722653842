import type { Scope } from '../domain/keys/scopes.ts';

/**
 * Who may call each route: a scope, `authenticated` (any valid key; the service narrows what it sees), or `public`
 * (no key). The auth hook reads this one table; a /v1 or /graphql route missing from it fails at start.
 */
export type RouteAccess = Scope | 'authenticated' | 'public';

export const ROUTE_ACCESS: Record<string, RouteAccess> = {
  'GET /healthz': 'public',
  'GET /readyz': 'public',
  'GET /docs/errors': 'public',
  // The admin console's static files; the page itself calls /graphql with the key the user enters.
  'GET /admin': 'public',
  'GET /admin/*': 'public',
  'GET /favicon.ico': 'public',

  // Projects: create and archive are operator-only, enforced by the project service for both surfaces.
  'POST /v1/projects': 'authenticated',
  'GET /v1/projects': 'authenticated',
  'GET /v1/projects/:project_id': 'authenticated',
  'POST /v1/projects/:project_id/archive': 'authenticated',

  'POST /v1/keys': 'keys:manage',
  'GET /v1/keys': 'keys:manage',
  'GET /v1/keys/:key_id': 'keys:manage',
  'POST /v1/keys/:key_id/rotate': 'keys:manage',
  'POST /v1/keys/:key_id/revoke': 'keys:manage',

  'GET /v1/audit/events': 'audit:read',

  // Rate limits (spec 4.3) and the project budget (CONTRACT §7); each GET needs the scope of its PUT.
  'PUT /v1/projects/:project_id/rate-limits': 'governance:manage',
  'GET /v1/projects/:project_id/rate-limits': 'governance:manage',
  'PUT /v1/projects/:project_id/budget': 'budgets:manage',
  'GET /v1/projects/:project_id/budget': 'budgets:manage',

  // Webhooks: CONTRACT §6, every endpoint needs governance:manage.
  'POST /v1/webhooks': 'governance:manage',
  'GET /v1/webhooks': 'governance:manage',
  'GET /v1/webhooks/:webhook_id': 'governance:manage',
  'POST /v1/webhooks/:webhook_id/disable': 'governance:manage',
  'GET /v1/webhooks/:webhook_id/deliveries': 'governance:manage',
  'POST /v1/webhooks/:webhook_id/deliveries/:delivery_id/replay': 'governance:manage',

  // Inference (spec 4.4) and its OpenAI-compatible twins (CONTRACT §8; models:read for the model list).
  'POST /v1/inference': 'inference:write',
  'POST /v1/chat/completions': 'inference:write',
  'GET /v1/models': 'models:read',
  'GET /v1/models/*': 'models:read',
  'GET /v1/usage': 'usage:read',
  // Routing policies: changes need governance:manage; reads any key with governance:manage or inference:write
  // (checked by the routing service).
  'POST /v1/routing/policies': 'governance:manage',
  'GET /v1/routing/policies': 'authenticated',
  'GET /v1/routing/policies/:policy_id': 'authenticated',
  'POST /v1/routing/policies/:policy_id': 'governance:manage',
  'PATCH /v1/routing/policies/:policy_id': 'governance:manage',
  'DELETE /v1/routing/policies/:policy_id': 'governance:manage',

  // GraphQL: each field declares its own scope (graphql/builder.ts scope-auth).
  'GET /graphql': 'authenticated',
  'POST /graphql': 'authenticated',
  'OPTIONS /graphql': 'public',
  // GraphiQL's page (outside production); the queries it sends go to /graphql with the key typed into it.
  'GET /graphiql': 'public',
};

export const routeKey = (method: string, url: string) => `${method} ${url}`;

export function accessFor(method: string, url: string | undefined): RouteAccess | undefined {
  if (url === undefined) return undefined;
  return ROUTE_ACCESS[routeKey(method === 'HEAD' ? 'GET' : method, url)];
}
