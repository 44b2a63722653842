/**
 * The limits that the request path calls (rate-limit hook, inference): one import for all of them. Budgets are the
 * domain's (domain/budgets/service.ts: assertWithinBudget, chargeSpend).
 *   new RateLimitTicket(limiter, clock, caller)  one per authenticated request (http/hooks/rate-limit.ts): take() or
 *                                        defer(); reserve(estimate) before the provider call (429 rate_limit_exceeded
 *                                        when it does not fit), settle(n) / refund() after it
 *   estimateTokens(messages, maxTokens?) prompt tokens (estimated, no tokenizer) + max_tokens or DEFAULT_COMPLETION_TOKENS
 *   countPromptTokens / countTextTokens  o200k counts (tokenizer loaded lazily) when a provider reports no usage
 */
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Bus } from '../pubsub/bus.ts';
import { FallbackLimitStore } from './fallback-store.ts';
import { Limiter } from './limiter.ts';
import { MemoryLimitStore } from './memory-store.ts';
import { RedisLimitStore } from './redis-store.ts';
import type { VersionedLimits } from './types.ts';

export { RateLimitTicket, isRequestWindowRefusal, rateLimitHeaders, type TicketCaller, type TicketLimiter } from './requests.ts';
export { estimateTokens, DEFAULT_COMPLETION_TOKENS, countPromptTokens, countTextTokens } from './tokens.ts';
export { Limiter, type RateLimitState } from './limiter.ts';

export interface CreateLimiterOptions {
  redis: Redis | null;
  redisPrefix: string;
  log: Logger;
  bus?: Bus;
  loadLimits: (projectId: string) => Promise<VersionedLimits>;
  /** The operator key's own request window (it has no project). */
  operatorRequestsPerMinute: number;
}

/** Redis with the in-process fallback when REDIS_URL is set; else the in-process store alone. */
export function createLimiter(opts: CreateLimiterOptions): Limiter {
  const operatorLimits = { requestsPerMinute: opts.operatorRequestsPerMinute, tokensPerMinute: 1, burst: 0, version: 0 };
  if (!opts.redis) {
    return new Limiter({ store: new MemoryLimitStore(), kind: 'memory', loadLimits: opts.loadLimits, operatorLimits, bus: opts.bus });
  }
  const store = new FallbackLimitStore(new RedisLimitStore(opts.redis, opts.redisPrefix), opts.redis, opts.log);
  return new Limiter({
    store,
    kind: 'redis',
    health: () => store.health(),
    loadLimits: opts.loadLimits,
    operatorLimits,
    bus: opts.bus,
  });
}
