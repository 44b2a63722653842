import type { FastifyInstance, FastifyRequest } from 'fastify';
import { rateLimitHeaders, takeRequest } from '../../limits/requests.ts';

/**
 * Takes one request from the caller's windows. Runs inside the auth hook, after the caller is known and before the
 * scope check, so that a 403 insufficient_scope is counted and carries the headers like any authenticated response.
 * A 401 has no key and so no window: it carries no X-Svc-RateLimit-* headers.
 */
export async function rateLimitRequest(req: FastifyRequest): Promise<void> {
  await takeRequest(req.ctx);
}

/**
 * X-Svc-RateLimit-* on every authenticated response, errors included (spec 8.1.6), from the state the last limiter
 * call left on the Ctx: the request window at first, the token windows once inference reserved or settled tokens.
 * Retry-After comes with the 429 itself (SvcError headers).
 */
export function registerRateLimitHeaders(app: FastifyInstance): void {
  app.addHook('onSend', async (req, reply, payload) => {
    const state = req.ctx?.rateLimit;
    if (state) {
      const { 'Retry-After': _retryAfter, ...headers } = rateLimitHeaders(state);
      reply.headers(headers);
    }
    return payload;
  });
}
