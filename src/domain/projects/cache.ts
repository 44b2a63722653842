import type { LRUCache } from 'lru-cache';
import type { Db } from '../../db/client.ts';
import { loadingCache, readThrough } from '../../kernel/cache.ts';
import type { RoutingStrategy, RoutingTarget } from '../routing/plan.ts';
import type { Bus } from '../../pubsub/bus.ts';

/** What an inference needs of its project: state, residency pin, budget, and the default routing policy. */
export interface CachedProject {
  id: string;
  status: string;
  region: string | null;
  budgetMicros: bigint | null;
  /** The project's default routing policy (what `model: "auto"` uses), or null for the built-in cheapest-first. */
  defaultPolicy: { id: string; strategy: RoutingStrategy; targets: RoutingTarget[]; cacheTtlS: number | null } | null;
  /** PII default and retention (CONTRACT §11, §12; domain/privacy): the defaults when the project never set them. */
  privacy?: { piiRedact: boolean; retentionMode: string; retentionDays: number };
}

/** The bus channel of project changes (the project id as message): every replica's cache evicts on it. */
export const PROJECTS_CHANGED = 'projects:changed';
/** A safety net only: changes are pushed over the bus, so an entry this old is re-read even if a message was lost. */
export const PROJECT_CACHE_TTL_MS = 60_000;
/** Past this share of the TTL a request still uses the entry and a reload starts in the background. */
const REFRESH_AHEAD = 0.8;
const MAX_ENTRIES = 100_000;

/** One statement (the policy comes in the same query through a lateral join). */
export async function loadCachedProject(db: Db, projectId: string): Promise<CachedProject | null> {
  const row = await db.project.findUnique({
    where: { id: projectId },
    select: {
      id: true,
      status: true,
      region: true,
      budgetMicros: true,
      routingPolicies: {
        where: { isDefault: true },
        orderBy: { id: 'desc' },
        take: 1,
        select: { id: true, strategy: true, targets: true, cacheTtlS: true },
      },
      privacy: { select: { piiRedact: true, retentionMode: true, retentionDays: true } },
    },
  });
  if (!row) return null;
  const policy = row.routingPolicies[0];
  return {
    id: row.id,
    status: row.status,
    region: row.region,
    budgetMicros: row.budgetMicros,
    defaultPolicy: policy
      ? {
          id: policy.id,
          strategy: policy.strategy as RoutingStrategy,
          targets: policy.targets as unknown as RoutingTarget[],
          cacheTtlS: policy.cacheTtlS,
        }
      : null,
    privacy: row.privacy ?? { piiRedact: false, retentionMode: 'standard', retentionDays: 30 },
  };
}

/**
 * In-process cache of project rows and default routing policies, so that a steady-state inference reads no SQL for
 * them. Archive, budget update and routing policy create/update/delete evict the project here before they answer
 * (invalidate(), after commit) and on every other replica through the bus. Loads that raced an eviction are not kept.
 * Entries are refreshed in the background before the TTL ends, so steady traffic never waits for a reload
 * (kernel/cache.ts: lru-cache).
 */
export class ProjectCache {
  private readonly entries: LRUCache<string, CachedProject>;

  constructor(
    private readonly bus: Bus,
    load: (projectId: string) => Promise<CachedProject | null>,
    monotonicNow: () => number = () => performance.now(),
    ttlMs = PROJECT_CACHE_TTL_MS,
  ) {
    this.entries = loadingCache({ ttlMs, max: MAX_ENTRIES, now: monotonicNow, load: async (projectId) => (await load(projectId)) ?? undefined });
    bus.subscribe(PROJECTS_CHANGED, (projectId) => this.entries.delete(projectId));
    bus.onResync(() => this.clear());
  }

  /** The project, or null when it does not exist (not cached). */
  async get(projectId: string): Promise<CachedProject | null> {
    return (await readThrough(this.entries, projectId, REFRESH_AHEAD)) ?? null;
  }

  /** Evicts here at once, then tells the other replicas. Call after the change has committed. */
  async invalidate(projectId: string): Promise<void> {
    this.entries.delete(projectId);
    await this.bus.publish(PROJECTS_CHANGED, projectId);
  }

  clear(): void {
    this.entries.clear();
  }
}
