import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { authenticate } from '../../domain/auth/service.ts';
import { NO_PROJECT_NAMES, makeCtx, type Caller } from '../../domain/context.ts';
import { SvcError } from '../../errors/svc-error.ts';
import { accessOf, actionOf, missingScope, registerRouteActions } from '../route-actions.ts';
import { callerMay } from '../../domain/operators/roles.ts';
import { refuseByRole } from '../../domain/operators/service.ts';
import { markAuthenticated } from '../../domain/usage/timings.ts';
import { sessionCallerOf, sessionTokenOf } from './session.ts';

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
    markAuthenticated(req.ctx, startedAt, req.headers.traceparent);
  });

  // The operator has no project of its own: its identity header names the project the call addressed.
  app.addHook('onSend', (req, reply, payload, done) => {
    if (req.ctx?.caller.kind === 'operator') reply.header('X-Svc-Project', req.ctx.projectId ?? '');
    done(null, payload);
  });
  return identify;
}
