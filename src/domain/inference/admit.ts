import { SvcError, invalid } from '../../errors/svc-error.ts';
import { estimateTokens, isRequestWindowRefusal } from '../../limits/index.ts';
import { RoutingError, type Route } from '../../providers/router.ts';
import { extrasUnsupported } from '../../providers/translate.ts';
import type { ProviderRequest } from '../../providers/types.ts';
import { cheapestRoutes, planRoutes } from '../routing/plan.ts';
import type { Ctx } from '../context.ts';
import { routesWithinKey } from '../auth/actions.ts';
import { assertWithinBudget } from '../budgets/service.ts';
import { planPrivacy, privacyReady } from '../privacy/stage.ts';
import { cacheKey, DEFAULT_CACHE_TTL_S } from './cache.ts';
import type { InferencePorts } from './ports.ts';
import type { Tracker } from './tracker.ts';
import type { Lookup, Plan, Validated } from './types.ts';

/**
 * Admission, after validation and before the provider: where the request may go (plan: project state, residency,
 * routes, cache key), then whether it may go now (admit: budget, cache lookup, token reservation).
 */

// ---- plan ----

/**
 * Project state and residency, then the routes (named model: its providers, cheapest first; "auto": the project's
 * default routing policy, else every route cheapest first). A pinned project is only routed to providers of its
 * region; a request naming another region is a residency_violation. The project and its policy come from the project
 * cache (no SQL in the steady state); the budget is checked next, in admit().
 */
export async function plan(ctx: Ctx, t: Tracker, v: Validated): Promise<Plan> {
  const project = await t.ports.projects.get(t.projectId);
  if (!project) throw new SvcError('not_found', { param: 'project_id', message: 'No such project.' });
  t.region = project.region ?? v.region;
  if (project.status === 'archived') throw new SvcError('project_archived', { param: 'project_id' });
  if (project.region !== null && v.region !== null && v.region !== project.region) {
    throw new SvcError('residency_violation', {
      param: 'region',
      message: `The project is pinned to region ${project.region}; the request asked for ${v.region}.`,
    });
  }
  const region = project.region ?? v.region;
  if (v.kind === 'chat') {
    const ready = privacyReady(project, v.pii);
    if (ready) await ready;
    ({ plan: t.privacy, messages: v.messages } = planPrivacy(t.ports.privacy, ctx, project, v.model, v.messages, v.pii));
  }
  const registry = t.ports.providers;
  let routes: Route[];
  let policyTtlS: number | null = null;
  if (v.model === 'auto') {
    const policy = project.defaultPolicy;
    routes = policy ? planRoutes(registry, policy.strategy, policy.targets) : cheapestRoutes(registry);
    policyTtlS = policy?.cacheTtlS ?? null;
  } else {
    routes = registry.routesForModel(v.model);
  }
  // CONTRACT §22: only the routes within the key's models ("auto" included); none: 403 insufficient_scope, param model.
  // A key without a model list may use every route.
  if (ctx.caller.models) routes = routesWithinKey(ctx.caller.models, v.model, routes);
  if (region !== null) routes = routes.filter((r) => r.provider.region === region);
  if (routes.length === 0) {
    const what = v.model === 'auto' ? 'the routing policy\'s targets' : v.model;
    throw new RoutingError('model_unavailable', null, `No configured provider serves ${what}${region ? ` in region ${region}` : ''}.`);
  }
  // A field a provider kind cannot carry skips its routes; none left: the field is the caller's to drop (CONTRACT §9).
  const carried = v.kind === 'chat' ? routesCarrying(routes, v) : { routes, refused: null };
  if (carried.routes.length === 0) {
    const kinds = [...new Set(routes.map((r) => r.provider.kind))].join(', ');
    throw invalid(carried.refused, `${carried.refused} is not supported by the provider kind (${kinds}) serving ${v.model}.`);
  }
  routes = carried.routes;
  let ttlS: number | null = v.cacheTtlS === -1 ? (policyTtlS ?? DEFAULT_CACHE_TTL_S) : v.cacheTtlS === null ? policyTtlS : v.cacheTtlS;
  if (ttlS === 0) ttlS = null;
  const cache =
    ttlS === null || t.privacy?.zero
      ? null
      : { key: cacheKey({ model: v.model, region, messages: v.messages, maxTokens: v.maxTokens, sampling: v.sampling, options: v.options }), ttlS };
  return { routes, region, cache, projectBudgetMicros: project.budgetMicros };
}

// ---- admit ----

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
 * travel in ONE script call (redis/batch.ts): the budget counters' read, the cache's get and the limiter's
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

/**
 * The routes whose provider kind can carry the request (Provider.unsupported), and the first field refused when some
 * cannot. Kinds without `unsupported` carry everything, so a request routed only to them costs nothing here.
 */
export function routesCarrying(
  routes: Route[],
  req: Omit<ProviderRequest, 'signal' | 'model'>,
): { routes: Route[]; refused: string | null } {
  const extras = req.options?.anthropic !== undefined;
  if (!extras && !routes.some((r) => r.provider.unsupported)) return { routes, refused: null };
  let refused: string | null = null;
  const out = routes.filter((r) => {
    const field = (extras ? extrasUnsupported(r.provider.kind, { ...req, model: r.model.id }) : null) ?? r.provider.unsupported?.({ ...req, model: r.model.id }) ?? null;
    refused ??= field;
    return field === null;
  });
  return { routes: out, refused };
}
