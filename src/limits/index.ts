/**
 * The limits that the request path calls (rate-limit hook, inference): one import for all of them. Budgets are the
 * domain's (domain/budgets/service.ts: assertWithinBudget, chargeSpend).
 *   new RateLimitTicket(limiter, clock, caller)  one per authenticated request (api/hooks/auth.ts): take() or
 *                                        defer(); reserve(estimate) before the provider call (429 rate_limit_exceeded
 *                                        when it does not fit), settle(n) / refund() after it
 *   estimateTokens(messages, maxTokens?) prompt tokens (estimated, no tokenizer) + max_tokens or DEFAULT_COMPLETION_TOKENS
 *   countPromptTokens / countTextTokens  o200k counts (tokenizer loaded lazily) when a provider reports no usage
 * The limiter itself is built by the composition root: createLimiter (redis/limiter.ts) picks Redis with the in-process
 * fallback, or the in-process store alone.
 */
export { RateLimitTicket, isRequestWindowRefusal, rateLimitHeaders, type TicketCaller, type TicketLimiter } from './requests.ts';
export { estimateTokens, DEFAULT_COMPLETION_TOKENS, countPromptTokens, countTextTokens } from './tokens.ts';
export { Limiter, type RateLimitState, type CustomerWindows } from './limiter.ts';
