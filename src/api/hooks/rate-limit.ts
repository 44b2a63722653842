import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { RateLimitTicket } from '../../limits/requests.ts';
import { accessOfRequest } from './auth.ts';
import { SvcError } from '../../errors/svc-error.ts';
import { errorBody, routeErrorBody } from '../error-body.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's hold on its rate-limit windows (limits/requests.ts); null until the caller is authenticated. */
    rateLimitTicket: RateLimitTicket | null;
  }
}

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
