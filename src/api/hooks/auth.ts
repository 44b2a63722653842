import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { authenticate } from '../../domain/auth/service.ts';
import { NO_PROJECT_NAMES, makeCtx, assertOneNamedProject, readProjectNames, type Caller } from '../../domain/context.ts';
import { SvcError } from '../../errors/svc-error.ts';
import { RateLimitTicket } from '../../limits/requests.ts';
import { errorBody, routeErrorBody } from '../error-body.ts';
import { scopeWords, scopesFor, type Action } from '../../domain/auth/actions.ts';
import type { Scope } from '../../domain/keys/scopes.ts';
import { CONSOLE_SESSION_HEADER, setConsoleSession } from '../../domain/audit/console-session.ts';
import { callerMay } from '../../domain/operators/roles.ts';
import { refuseByRole } from '../../domain/operators/service.ts';
import { sessionCallerOf, sessionTokenOf } from './session.ts';

/*
 * The caller, at the edge, for REST and /graphql alike: who it is (a key or a console session) and whether the route's
 * action allows it (registerAuth), its rate-limit windows (rateLimitRequest, registerRateLimitHeaders) and the project
 * the request names (registerProjectNames).
 */

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's hold on its rate-limit windows (limits/requests.ts); null until the caller is authenticated. */
    rateLimitTicket: RateLimitTicket | null;
  }
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

/** Each action's access, worked out on first use (the action table is fixed at start). */
const ACCESS = new Map<RouteAction, RouteAccess>();

export function accessOf(action: RouteAction): RouteAccess {
  let access = ACCESS.get(action);
  if (access === undefined) ACCESS.set(action, (access = accessFromTable(action)));
  return access;
}

function accessFromTable(action: RouteAction): RouteAccess {
  if (action === 'authenticated' || action === 'public') return action;
  const scopes = scopesFor(action);
  if (scopes.length === 0) return 'authenticated';
  // One scope stays a plain string: the rate limiter (rateLimitRequest) compares it with the caller's.
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
    // The project it names is read before validation (registerProjectNames).
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
    // The request's marks for its usage record's timings, read only by an inference (domain/inference/tracker.ts): when
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

// ---- the rate limit ----

/**
 * Routes whose request is taken together with their token reservation (RateLimitTicket.defer): one Redis round trip
 * before the provider call instead of two. Only for a caller holding the route's scope: a 403 is counted here.
 */
const TAKEN_WITH_TOKENS = new Set(['/v1/inference', '/v1/chat/completions', '/v1/responses', '/v1/embeddings', '/v1beta/models/*', '/v1/messages']);

/**
 * Opens the request's rate-limit ticket and takes one request from the caller's windows. Runs inside the auth hook,
 * after the caller is known and before the scope check, so that a 403 insufficient_scope is counted and carries the
 * headers like any authenticated response. A 401 has no key and so no window: it carries no X-Svc-RateLimit-* headers.
 */
export async function rateLimitRequest(req: FastifyRequest): Promise<void> {
  const { caller } = req.ctx;
  const { limiter, clock } = req.server.deps;
  const ticket = new RateLimitTicket(limiter, clock, caller);
  req.rateLimitTicket = ticket;
  const route = req.routeOptions.url;
  if (req.method === 'POST' && route !== undefined && TAKEN_WITH_TOKENS.has(route)) {
    const access = accessOfRequest(req);
    if (typeof access === 'string' && caller.scopes.includes(access as never)) return ticket.defer();
  }
  await ticket.take();
}

/** The ticket of an authenticated route, for the service that draws on it (inference). */
export function ticketOf(req: FastifyRequest): RateLimitTicket {
  if (!req.rateLimitTicket) throw new Error(`${req.method} ${req.routeOptions.url} has no rate-limit ticket: it is not authenticated`);
  return req.rateLimitTicket;
}

/**
 * X-Svc-RateLimit-* on every authenticated response, errors included (spec 8.1.6), from the ticket's binding window:
 * the request window at first, the token windows once inference reserved or settled tokens. Retry-After comes with
 * the 429 itself (SvcError headers).
 */
export function registerRateLimitHeaders(app: FastifyInstance): void {
  app.decorateRequest('rateLimitTicket', null);
  // Synchronous unless a deferred request is still pending (rare: every way out takes it first).
  app.addHook('onSend', (req, reply, payload, done) => {
    const ticket = req.rateLimitTicket;
    if (!ticket) return done(null, payload);
    if (ticket.pending) return takeLate(req, reply, ticket, payload);
    setStateHeaders(reply, ticket);
    done(null, payload);
  });
}

function setStateHeaders(reply: FastifyReply, ticket: RateLimitTicket): void {
  const state = ticket.state;
  if (!state) return;
  reply.header('X-Svc-RateLimit-Limit', String(state.limit));
  reply.header('X-Svc-RateLimit-Remaining', String(state.remaining));
  reply.header('X-Svc-RateLimit-Reset', String(state.reset));
  reply.header('X-Svc-RateLimit-Resource', state.resource);
}

/**
 * Every way out of a deferred request takes it (the token reservation, the error handler, a cache hit, an idempotent
 * replay). One that did not is counted now, and an exhausted window still answers 429 with its headers: a request is
 * never served past its window (CONTRACT §7).
 */
async function takeLate(req: FastifyRequest, reply: FastifyReply, ticket: RateLimitTicket, payload: unknown): Promise<unknown> {
  try {
    await ticket.takeDeferred();
  } catch (err) {
    if (!(err instanceof SvcError)) throw err;
    reply.removeHeader('Idempotent-Replayed');
    reply.code(err.http).headers(err.headers ?? {}).type('application/json; charset=utf-8');
    payload = JSON.stringify(routeErrorBody(req, err.http, errorBody(req, err.code, err.message, err.param)));
  }
  setStateHeaders(reply, ticket);
  return payload;
}

// ---- the project the request names ----

/**
 * The project a request names, read once (CONTRACT §2, §3): before validation, so that the idempotency hook (also
 * preValidation, registered after this) scopes its key by it; frozen into `ctx.project`, which tenancy, idempotency
 * and governance read. REST names it in the query or body `project_id` and X-Svc-Project; /graphql in the header only
 * (its fields name theirs as arguments). A multipart form is read by its handler, after the hooks: its fields are the
 * service's arguments.
 */
export function registerProjectNames(app: FastifyInstance): void {
  app.addHook('preValidation', (req, _reply, done) => {
    if (req.ctx) {
      const rest = req.url.startsWith('/v1/');
      req.ctx.project = readProjectNames(rest ? req.query : null, rest ? req.body : null, req.headers['x-svc-project']);
    }
    done();
  });

  // Once the request is valid (a 400 for its fields comes first): the query and the body must name the same project.
  app.addHook('preHandler', (req, _reply, done) => {
    if (req.ctx) assertOneNamedProject(req.ctx.project);
    done();
  });
}
