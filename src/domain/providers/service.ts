import type { Route } from '../../providers/router.ts';
import type { CircuitState } from '../../providers/router.ts';
import { visibleProjectId, type Ctx } from '../context.ts';
import type { ProviderRouter } from '../inference/ports.ts';

/** How far back a provider's recent traffic is read (the Models and providers screen's "last hour"). */
export const RECENT_WINDOW_MS = 3_600_000;

/** A model as the providers file configures it, with its prices (USD per million tokens). */
export interface ConfiguredModel {
  id: string;
  type: 'chat' | 'embedding';
  inputPerMtok: number;
  outputPerMtok: number;
  cacheReadPerMtok: number | null;
  cacheWritePerMtok: number | null;
  /** The share taken off batch requests' price (0.5: half price), where the file sets one. */
  batchDiscount: number | null;
}

/** The project's own requests through one provider in the recent window (usage records: nobody else's traffic). */
export interface RecentTraffic {
  requests: number;
  failed: number;
  /** failed / requests, 0 when there were none. */
  errorRate: number;
  latencyP50Ms: number | null;
  latencyP95Ms: number | null;
  lastAt: Date | null;
}

export interface ProviderStatus {
  name: string;
  kind: string;
  region: string;
  timeoutMs: number;
  /** This replica's circuit breaker (CONTRACT §8: a provider that keeps failing is taken out for a while). */
  circuit: CircuitState;
  models: ConfiguredModel[];
  recent: RecentTraffic;
}

/** The providers' routes and circuits, as this service reads them. */
export type ProviderCatalog = Pick<ProviderRouter, 'routes' | 'circuitState'>;

interface TrafficRow {
  provider: string;
  requests: bigint;
  failed: bigint;
  p50: number | null;
  p95: number | null;
  last_at: Date | null;
}

function modelOf(route: Route): ConfiguredModel {
  const m = route.model as Route['model'] & { batchDiscount?: number };
  return {
    id: m.id,
    type: m.type,
    inputPerMtok: m.inputPerMtok,
    outputPerMtok: m.outputPerMtok,
    cacheReadPerMtok: m.cacheReadPerMtok ?? null,
    cacheWritePerMtok: m.cacheWritePerMtok ?? null,
    batchDiscount: m.batchDiscount ?? null,
  };
}

/**
 * The providers file as configured (no base url or key: those stay the operator's) with each provider's circuit state
 * on this replica and the addressed project's own traffic through it over the last hour: request count, error rate,
 * p50 and p95 latency (one grouped statement over usage_records' (project_id, created_at) index). The operator without
 * a project sees the configuration and circuits with no traffic.
 */
export async function listProviders(providers: ProviderCatalog, ctx: Ctx, requestedProjectId?: string | null): Promise<ProviderStatus[]> {
  const projectId = await visibleProjectId(ctx, requestedProjectId);
  const since = new Date(ctx.now().getTime() - RECENT_WINDOW_MS);
  // Usage routes are "<provider>/<model>": grouped by the provider's part.
  const rows =
    projectId === undefined
      ? []
      : await ctx.db.$queryRaw<TrafficRow[]>`
        SELECT split_part(route, '/', 1) AS provider, count(*) AS requests,
               count(*) FILTER (WHERE status = 'failed') AS failed,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms) AS p50,
               percentile_cont(0.95) WITHIN GROUP (ORDER BY latency_ms) AS p95,
               max(created_at) AS last_at
        FROM usage_records
        WHERE project_id = ${projectId} AND created_at >= ${since} AND route IS NOT NULL
        GROUP BY 1`;
  const traffic = new Map(rows.map((r) => [r.provider, r]));
  const out = new Map<string, ProviderStatus>();
  for (const route of providers.routes) {
    const p = route.provider;
    let status = out.get(p.name);
    if (!status) {
      const t = traffic.get(p.name);
      const requests = t ? Number(t.requests) : 0;
      const failed = t ? Number(t.failed) : 0;
      status = {
        name: p.name,
        kind: p.kind,
        region: p.region,
        timeoutMs: p.timeoutMs,
        circuit: providers.circuitState(p.name) ?? 'closed',
        models: [],
        recent: {
          requests,
          failed,
          errorRate: requests > 0 ? failed / requests : 0,
          latencyP50Ms: t?.p50 == null ? null : Math.round(Number(t.p50)),
          latencyP95Ms: t?.p95 == null ? null : Math.round(Number(t.p95)),
          lastAt: t?.last_at ? new Date(t.last_at) : null,
        },
      };
      out.set(p.name, status);
    }
    status.models.push(modelOf(route));
  }
  return [...out.values()];
}
