import { SvcError, invalid } from '../../errors/svc-error.ts';
import { routesCarrying, RoutingError, type Route } from '../../providers/router.ts';
import type { Ctx } from '../context.ts';
import { routesWithinKey } from '../keys/models.ts';
import { cacheKey, DEFAULT_CACHE_TTL_S } from './cache.ts';
import { planPrivacy, privacyReady } from '../privacy/stage.ts';
import type { Tracker } from './tracker.ts';
import type { Plan, Validated } from './types.ts';

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
    routes = policy ? registry.planRoutes(policy.strategy, policy.targets) : registry.cheapestRoutes();
    policyTtlS = policy?.cacheTtlS ?? null;
  } else {
    routes = registry.routesForModel(v.model);
  }
  // CONTRACT §22: only the routes within the key's models ("auto" included); none: 403 insufficient_scope, param model.
  routes = routesWithinKey(ctx.caller, v.model, routes);
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
