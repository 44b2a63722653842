import { estimateTokens, isRequestWindowRefusal } from '../../limits/index.ts';
import type { Ctx } from '../context.ts';
import type { InferencePorts } from './ports.ts';
import { assertWithinBudget } from '../budgets/service.ts';
import type { Tracker } from './tracker.ts';
import type { Lookup, Plan, Validated } from './types.ts';

/** Tokens to reserve before the provider call: the messages' estimate, plus what their text does not show. */
function reservationOf(v: Validated): number {
  return estimateTokens(v.messages, v.maxTokens) + v.extraTokens;
}

async function lookup(ports: InferencePorts, projectId: string, p: Plan): Promise<Lookup> {
  if (!p.cache) return { status: 'off' };
  const found = await ports.responseCache.get(projectId, p.cache.key);
  return found.status === 'hit' ? { status: 'hit', answer: found.answer } : { status: found.status };
}

const NO_CACHE: Lookup = { status: 'off' };

/**
 * The budget check, the response cache lookup (when caching) and the token reservation, which also takes the request
 * deferred by the rate-limit hook. They are asked in the same turn of the event loop, so their Redis operations
 * travel in ONE script call (limits/redis-batch.ts): the budget counters' read, the cache's get and the limiter's
 * windows. The reservation is asked for before the lookup is known: a hit takes no tokens, so it gives them back with
 * its outcome, after (serveHit); a hit whose reservation was refused for tokens had its request taken alone, as a hit
 * needs. A request over budget gets 429 budget_exceeded (never rate_limit_exceeded, unless its request window was
 * exhausted: that check came first before the deferral) and any tokens taken meanwhile are given back.
 */
export async function admit(ctx: Ctx, t: Tracker, v: Validated, p: Plan): Promise<{ cached: Lookup; reserved: boolean }> {
  const ticket = t.ticket;
  const [budget, reserved, cached] = await Promise.allSettled([
    assertWithinBudget(t.ports.budgets, ctx, p.projectBudgetMicros, t.customer),
    ticket.reserve(reservationOf(v)),
    p.cache ? lookup(t.ports, t.projectId, p) : NO_CACHE,
  ]);
  if (budget.status === 'rejected' || cached.status === 'rejected') {
    if (reserved.status === 'rejected' && isRequestWindowRefusal(reserved.reason)) throw reserved.reason;
    // As if the budget had been checked alone: the response describes the windows with no tokens taken (the
    // withdrawal's state, or the request window's when the hook took the request).
    await ticket.withdraw();
    throw budget.status === 'rejected' ? budget.reason : (cached as PromiseRejectedResult).reason;
  }
  if (cached.value.answer) {
    // A hit needs only its request: a request window refusal stands, a token window refusal does not.
    if (reserved.status === 'rejected' && isRequestWindowRefusal(reserved.reason)) throw reserved.reason;
    return { cached: cached.value, reserved: false };
  }
  if (reserved.status === 'rejected') throw reserved.reason;
  return { cached: cached.value, reserved: true };
}
