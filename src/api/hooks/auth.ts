import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { authenticate } from '../../domain/auth/service.ts';
import { NO_PROJECT_NAMES, makeCtx, type Caller } from '../../domain/context.ts';
import { SvcError } from '../../errors/svc-error.ts';
import { scopeWords, scopesFor, type Action } from '../../domain/auth/actions.ts';
import type { Scope } from '../../domain/keys/scopes.ts';
import { CONSOLE_SESSION_HEADER, setConsoleSession } from '../../domain/audit/console-session.ts';
import { callerMay } from '../../domain/operators/roles.ts';
import { refuseByRole } from '../../domain/operators/service.ts';
import { sessionCallerOf, sessionTokenOf } from './session.ts';

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

/** Runs once the caller is known, before the scope check: the rate limiter, so that a 403 is counted too. */
export type AfterAuthentication = (req: FastifyRequest, reply: FastifyReply) => Promise<void>;

export type Identify = (req: FastifyRequest, reply: FastifyReply) => Promise<Caller>;

/**
 * Authenticates the caller (401 when the key is not valid), puts its Ctx on the request, sets the identity headers
 * (spec 4.3) and runs `afterAuthentication` (the rate limiter). Shared by the auth hook and the 404 handler.
 */
export function identifyCaller(app: FastifyInstance, afterAuthentication?: AfterAuthentication): Identify {
  return async (req: FastifyRequest, reply: FastifyReply): Promise<Caller> => {
    // A console session's cookie (issue 22) when no Authorization header is sent; otherwise the key, as always.
    const sessionToken = req.headers.cookie === undefined ? null : sessionTokenOf(req);
    const caller = sessionToken ? await sessionCallerOf(req, sessionToken) : await authenticate(app.ports.auth, req.routeOptions.config?.credential?.(req) ?? req.headers.authorization);
    // The project it names is read before validation (hooks/project.ts).
    req.ctx = makeCtx(app.deps, { requestId: req.id, caller, ip: req.ip ?? null, project: NO_PROJECT_NAMES });
    // CONTRACT §22: the end customer any inbound route may name (validated by the inference that uses it).
    const customer = req.headers['x-svc-customer'];
    if (customer !== undefined) req.ctx.customerHeader = Array.isArray(customer) ? customer.join(',') : customer;
    // The console's browsing session, for the audit log's key.list rule (API callers send none).
    const consoleSession = req.headers[CONSOLE_SESSION_HEADER];
    if (consoleSession !== undefined) setConsoleSession(req.ctx, consoleSession);
    reply.header('X-Svc-Key-Id', caller.keyId);
    reply.header('X-Svc-Project', caller.projectId ?? '');
    reply.header('X-Svc-Scopes', caller.scopes.join(' '));
    if (afterAuthentication) await afterAuthentication(req, reply);
    return caller;
  };
}

/** Authentication and scope checks for every route (REST and GraphQL) except the public ones. */
export function registerAuth(app: FastifyInstance, afterAuthentication?: AfterAuthentication): Identify {
  registerRouteActions(app);

  const identify = identifyCaller(app, afterAuthentication);
  app.addHook('onRequest', async (req, reply) => {
    const startedAt = performance.now();
    const action = actionOf(req);
    // Unknown routes fall through to the 404 handler (it identifies a caller that sent a key); public routes need no key.
    if (action === undefined || action === 'public') return;
    // A route public for some requests only (GraphiQL's page on a browser's GET /graphql: graphql/yoga.ts).
    if (req.routeOptions.config.publicWhen?.(req)) return;
    const caller = await identify(req, reply);
    const missing = missingScope(accessOf(action), caller.scopes);
    if (missing) throw new SvcError('insufficient_scope', { message: `This request requires the ${missing} scope.` });
    // A console session's role in the project (issue 22): a viewer reads only.
    if (caller.kind === 'session' && action !== 'authenticated' && !callerMay(caller, action)) {
      throw await refuseByRole(app.ports.operators, req.ctx, action);
    }
    // The request's marks for its usage record's timings, read only by an inference (domain/usage/timings.ts): when
    // this hook began and ended, and the caller's traceparent as sent (parsed only if an inference records it).
    const { ctx } = req;
    ctx.startedAt = startedAt;
    ctx.authenticatedAt = performance.now();
    const { traceparent } = req.headers;
    if (typeof traceparent === 'string') ctx.traceparent = traceparent;
  });

  // The operator has no project of its own: its identity header names the project the call addressed.
  app.addHook('onSend', (req, reply, payload, done) => {
    if (req.ctx?.caller.kind === 'operator') reply.header('X-Svc-Project', req.ctx.projectId ?? '');
    done(null, payload);
  });
  return identify;
}
