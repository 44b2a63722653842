import type { FastifyInstance, FastifyRequest } from 'fastify';
import { deferRequest, rateLimitHeaders, takePendingRequest, takeRequest } from '../../limits/requests.ts';
import { accessFor } from '../../rest/scopes.ts';
import { SvcError } from '../../errors/svc-error.ts';
import { errorBody } from '../error-body.ts';

/**
 * Routes whose request is taken together with their token reservation (limits/requests.ts deferRequest): one Redis
 * round trip before the provider call instead of two. Only for a caller holding the route's scope: a 403 is counted here.
 */
const TAKEN_WITH_TOKENS = new Set(['/v1/inference', '/v1/chat/completions']);

/**
 * Takes one request from the caller's windows. Runs inside the auth hook, after the caller is known and before the
 * scope check, so that a 403 insufficient_scope is counted and carries the headers like any authenticated response.
 * A 401 has no key and so no window: it carries no X-Svc-RateLimit-* headers.
 */
export async function rateLimitRequest(req: FastifyRequest): Promise<void> {
  const route = req.routeOptions.url;
  if (req.method === 'POST' && route !== undefined && TAKEN_WITH_TOKENS.has(route)) {
    const access = accessFor(req.method, route);
    if (typeof access === 'string' && req.ctx.caller.scopes.includes(access as never)) return deferRequest(req.ctx);
  }
  await takeRequest(req.ctx);
}

/**
 * X-Svc-RateLimit-* on every authenticated response, errors included (spec 8.1.6), from the state the last limiter
 * call left on the Ctx: the request window at first, the token windows once inference reserved or settled tokens.
 * Retry-After comes with the 429 itself (SvcError headers).
 */
export function registerRateLimitHeaders(app: FastifyInstance): void {
  app.addHook('onSend', async (req, reply, payload) => {
    // Every way out of a deferred request takes it (the token reservation, the error handler, a cache hit, an
    // idempotent replay). One that did not is counted now, and an exhausted window still answers 429 with its headers:
    // a request is never served past its window (CONTRACT §7).
    if (req.ctx?.requestPending) {
      try {
        await takePendingRequest(req.ctx);
      } catch (err) {
        if (!(err instanceof SvcError)) throw err;
        reply.removeHeader('Idempotent-Replayed');
        reply.code(err.http).headers(err.headers ?? {}).type('application/json; charset=utf-8');
        payload = JSON.stringify(errorBody(req, err.code, err.message, err.param));
      }
    }
    const state = req.ctx?.rateLimit;
    if (state) {
      const { 'Retry-After': _retryAfter, ...headers } = rateLimitHeaders(state);
      reply.headers(headers);
    }
    return payload;
  });
}
