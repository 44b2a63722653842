import { countPromptTokens, countTextTokens } from '../../limits/index.ts';
import { usageCostMicros } from '../../kernel/money.ts';
import type { Route } from '../../providers/router.ts';
import type { ProviderUsage, ToolCall } from '../../providers/types.ts';
import type { Ctx } from '../context.ts';
import { chargeSpend } from '../budgets/service.ts';
import type { CachedAnswer } from './cache.ts';
import { NO_TALLY, type Tally } from './stages/structured-output.ts';
import type { Tracker } from './tracker.ts';
import type { Answer, CacheStatus, InferenceResult, Plan, TokenDetails, Validated } from './types.ts';

export async function tokensOf(v: Validated, content: string, usage: ProviderUsage | null, toolCalls?: ToolCall[], messages = v.messages): Promise<ProviderUsage> {
  if (usage) return usage;
  let completion = await countTextTokens(content);
  if (toolCalls) for (const c of toolCalls) completion += (await countTextTokens(c.function.name + c.function.arguments)) + 3;
  return { promptTokens: (await countPromptTokens(messages)) + v.extraTokens, completionTokens: completion };
}

function hitResult(ctx: Ctx, t: Tracker, answer: CachedAnswer): InferenceResult {
  return {
    id: t.id,
    requestId: ctx.requestId,
    createdAt: t.createdAt,
    model: answer.model,
    route: answer.route,
    region: answer.region,
    cacheHit: true,
    cacheStatus: 'hit',
    content: answer.content,
    finishReason: answer.finishReason,
    toolCalls: answer.toolCalls,
    logprobs: answer.logprobs,
    choices: answer.choices,
    promptTokens: 0,
    completionTokens: 0,
    costMicros: 0n,
    ...(t.citations ? { citations: t.citations } : {}),
    ...(t.template ? { template: t.template } : {}),
  };
}

/**
 * A cache hit: one request, zero tokens, zero cost (spec 8.1.3). The speculative reservation's tokens go back in the
 * same script call as the outcome's stream entry.
 */
export async function serveHit(t: Tracker, answer: CachedAnswer): Promise<InferenceResult> {
  t.answeredAt = performance.now();
  t.model = answer.model;
  t.route = answer.route;
  t.region = answer.region;
  const result = hitResult(t.ctx, t, answer);
  await Promise.all([t.ticket.keepRequestOnly(), t.record({ status: 'succeeded', errorCode: null, cacheHit: true, result })]);
  return result;
}

/**
 * Settle the token reservation to what was used, charge the cost to the month counters, remember the answer, hand
 * the outcome (usage record and inference.completed) to the writer. Their Redis commands (the limiter's settle, the
 * counters' add, the stream's XADD, the cache's SET) leave together in one script call, and no SQL. The response does
 * not wait for Redis's answer to it: each of them is done for this function once the call is in the kernel's socket
 * buffer (redis/batch.ts post()), which a kill -9 of the gateway does not take back; what Redis refuses after that
 * goes its own retry path (the outcome written directly, the spend and the settlement owed to Redis).
 */
export async function account(
  t: Tracker,
  v: Validated,
  p: Plan,
  route: Route,
  answer: Answer,
  cacheStatus: CacheStatus,
  outcome: { status: 'succeeded' } | { status: 'failed'; errorCode: string },
  /** Earlier attempts of a structured-output request: charged and recorded with this one (CONTRACT §11). */
  prior: Tally = NO_TALLY,
): Promise<InferenceResult> {
  const ctx = t.ctx;
  t.answeredAt = performance.now();
  const promptTokens = answer.usage.promptTokens + prior.promptTokens;
  const completionTokens = answer.usage.completionTokens + prior.completionTokens;
  // Cache reads and writes at the model's cache prices, where the providers file sets them (kernel/money.ts).
  const cost = usageCostMicros(answer.usage, route.model) + prior.costMicros;
  const details = tokenDetailsOf(answer.usage);
  const spend = chargeSpend(t.ports.budgets, ctx, t.projectId, cost, p.projectBudgetMicros, t.customer);
  const settled = t.ticket.settle(promptTokens + completionTokens);
  const stored =
    outcome.status === 'succeeded' && p.cache && cacheStatus === 'miss'
      ? t.ports.responseCache.set(
          t.projectId,
          p.cache.key,
          {
            model: route.model.id,
            route: route.id,
            region: route.provider.region,
            content: answer.content,
            finishReason: answer.finishReason,
            toolCalls: answer.toolCalls,
            logprobs: answer.logprobs,
            choices: answer.choices,
          },
          p.cache.ttlS,
        )
      : null;
  const result: InferenceResult = {
    ...t.answeredBy(route, cacheStatus),
    content: answer.content,
    finishReason: answer.finishReason,
    toolCalls: answer.toolCalls,
    logprobs: answer.logprobs,
    choices: answer.choices,
    ...(answer.thinking ? { thinking: answer.thinking } : {}),
    promptTokens,
    completionTokens,
    ...(details ? { tokenDetails: details } : {}),
    costMicros: cost,
    ...(t.citations ? { citations: t.citations } : {}),
    ...(t.template ? { template: t.template } : {}),
  };
  const recorded = t.record({
    status: outcome.status,
    errorCode: outcome.status === 'failed' ? outcome.errorCode : null,
    promptTokens,
    completionTokens,
    costMicros: cost,
    spend: spend.charge,
    result,
  });
  const [, , , wasStored] = await Promise.all([settled, spend.added, recorded, stored]);
  return wasStored === false ? { ...result, cacheStatus: 'unavailable' } : result;
}

/** The parts of the provider's usage beyond its two totals (cache reads and writes, reasoning), or undefined for none. */
export function tokenDetailsOf(u: ProviderUsage): TokenDetails | undefined {
  if (u.cacheReadTokens === undefined && u.cacheWriteTokens === undefined && u.reasoningTokens === undefined) return undefined;
  const d: TokenDetails = {};
  if (u.cacheReadTokens !== undefined) d.cacheReadTokens = u.cacheReadTokens;
  if (u.cacheWriteTokens !== undefined) d.cacheWriteTokens = u.cacheWriteTokens;
  if (u.reasoningTokens !== undefined) d.reasoningTokens = u.reasoningTokens;
  return d;
}

/** CONTRACT §11: a JSON response_format's answer says how many it took (0: from the response cache). */
export function withAttempts(v: Validated, result: InferenceResult, attempts: number): InferenceResult {
  if (v.output) result.attempts = attempts;
  return result;
}
