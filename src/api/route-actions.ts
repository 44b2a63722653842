import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify';
import { scopeWords, scopesFor, type Action } from '../domain/auth/actions.ts';
import type { Scope } from '../domain/keys/scopes.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * What the route does, declared beside its handler: an action of domain/auth/actions.ts (whose scopes the auth
     * hook checks, as GraphQL's twin field does), `public` (no key) or `authenticated` (any valid key; /graphql, whose
     * fields check their own actions). A route without one refuses to start (registerRouteActions).
     */
    action?: RouteAction;
    /** A route public for some requests only (GraphiQL's page on a browser's GET /graphql: graphql/yoga.ts). */
    publicWhen?: (req: FastifyRequest) => boolean;
    /**
     * Where a protocol's clients send the key when not as `Authorization: Bearer` (Anthropic's `x-api-key`, Google's
     * `x-goog-api-key` or `?key=`): returns it as an Authorization header value, or undefined to read Authorization.
     */
    credential?: (req: FastifyRequest) => string | undefined;
  }
  interface FastifyInstance {
    /** Every route's action by `METHOD url`, as the routes declared them: what the OpenAPI document and tests read. */
    routeActions: ReadonlyMap<string, RouteAction>;
  }
}

/** What a route does: an action of the table, `authenticated` or `public`. */
export type RouteAction = Action | 'authenticated' | 'public';

/** Who may call a route, as the auth hook checks it: one scope, any one of several, any valid key, or no key. */
export type RouteAccess = Scope | readonly Scope[] | 'authenticated' | 'public';

export function accessOf(action: RouteAction): RouteAccess {
  if (action === 'authenticated' || action === 'public') return action;
  const scopes = scopesFor(action);
  if (scopes.length === 0) return 'authenticated';
  // One scope stays a plain string: the rate limiter (api/hooks/rate-limit.ts) compares it with the caller's.
  return scopes.length === 1 ? scopes[0]! : scopes;
}

/** The scope(s) a caller lacks for a route, as a refusal names them; null when its scopes allow the route. */
export function missingScope(access: RouteAccess, scopes: readonly Scope[]): string | null {
  if (access === 'authenticated' || access === 'public') return null;
  const needed: readonly Scope[] = typeof access === 'string' ? [access] : access;
  return needed.some((scope) => scopes.includes(scope)) ? null : scopeWords(needed);
}

export const routeKey = (method: string, url: string) => `${method === 'HEAD' ? 'GET' : method} ${url}`;

/** The action the matched route declared; undefined for an unknown route (the 404 handler's). */
export function actionOf(req: FastifyRequest): RouteAction | undefined {
  return req.routeOptions.config?.action;
}

/** Who may call the matched route. */
export function accessOfRequest(req: FastifyRequest): RouteAccess | undefined {
  const action = actionOf(req);
  return action === undefined ? undefined : accessOf(action);
}

/**
 * Collects every route's declared action into `app.routeActions` and refuses to start (at ready) when a route
 * declares none. Read at ready, not as each route is added: a plugin may give its routes an action in its own onRoute
 * hook (publicRoutes), which runs after this one.
 */
export function registerRouteActions(app: FastifyInstance): void {
  const actions = new Map<string, RouteAction>();
  const declared: RouteOptions[] = [];
  app.decorate('routeActions', actions);
  app.addHook('onRoute', (route) => {
    declared.push(route);
  });
  app.addHook('onReady', async () => {
    for (const route of declared) {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      for (const method of methods) {
        if (method === 'HEAD') continue;
        const action = (route.config as { action?: RouteAction } | undefined)?.action;
        if (action === undefined) throw new Error(`route ${method} ${route.url} declares no action (config.action)`);
        actions.set(routeKey(method, route.url), action);
      }
    }
  });
}

/** For a plugin whose routes are all public (SCIM and sign-in check their own credentials; the reference pages). */
export function publicRoutes(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    route.config = { ...(route.config as object), action: (route.config as { action?: RouteAction } | undefined)?.action ?? 'public' } as never;
  });
}
