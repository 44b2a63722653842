import { byPrice, type ProviderRegistry, type Route } from '../../providers/router.ts';

/** How a routing policy orders its targets (its `strategy`). */
export type RoutingStrategy = 'ordered' | 'cheapest' | 'weighted';

/** One target of a routing policy: a model, through one provider or (null) every provider serving it. */
export interface RoutingTarget {
  provider: string | null;
  model: string;
  weight: number;
}

/** What planning reads of the providers: their routes, and the weighted strategy's draw. */
export type RoutePlanner = Pick<ProviderRegistry, 'routes' | 'findRoute' | 'routesForModel' | 'random'>;

/** The default for `model: "auto"` without a policy: every chat route, cheapest first. */
export function cheapestRoutes(providers: RoutePlanner): Route[] {
  return byPrice(providers.routes.filter((r) => r.model.type !== 'embedding'));
}

/**
 * A routing policy's targets as routes: `ordered` keeps the order, `cheapest` sorts by price, `weighted` draws the
 * order at random by weight (the first pick gets the traffic share; the rest are its fallbacks). A target without a
 * provider stands for every provider serving its model, cheapest first. Targets no longer configured are skipped.
 */
export function planRoutes(providers: RoutePlanner, strategy: RoutingStrategy, targets: readonly RoutingTarget[]): Route[] {
  let ordered = [...targets];
  if (strategy === 'weighted') {
    const pool = [...targets];
    ordered = [];
    while (pool.length > 0) {
      const total = pool.reduce((n, t) => n + t.weight, 0);
      let x = providers.random() * total;
      let i = 0;
      while (i < pool.length - 1 && x >= pool[i]!.weight) x -= pool[i++]!.weight;
      ordered.push(pool.splice(i, 1)[0]!);
    }
  }
  const out: Route[] = [];
  const seen = new Set<string>();
  for (const t of ordered) {
    const routes = t.provider ? [providers.findRoute(t.provider, t.model)].filter((r): r is Route => !!r) : providers.routesForModel(t.model);
    for (const r of routes) {
      if (!seen.has(r.id)) {
        seen.add(r.id);
        out.push(r);
      }
    }
  }
  return strategy === 'cheapest' ? byPrice(out) : out;
}
