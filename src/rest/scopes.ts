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

  // GraphQL: each field declares its own scope (graphql/builder.ts scope-auth).
  'GET /graphql': 'authenticated',
  'POST /graphql': 'authenticated',
  'OPTIONS /graphql': 'public',
};

export const routeKey = (method: string, url: string) => `${method} ${url}`;

export function accessFor(method: string, url: string | undefined): RouteAccess | undefined {
  if (url === undefined) return undefined;
  return ROUTE_ACCESS[routeKey(method === 'HEAD' ? 'GET' : method, url)];
}
