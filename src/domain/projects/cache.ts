import type { Db } from '../../db/client.ts';
import type { RoutingStrategy, RoutingTarget } from '../../providers/router.ts';
import type { Bus } from '../../pubsub/bus.ts';

/** What an inference needs of its project: state, residency pin, budget, and the default routing policy. */
export interface CachedProject {
  id: string;
  status: string;
  region: string | null;
  budgetMicros: bigint | null;
  /** The project's default routing policy (what `model: "auto"` uses), or null for the built-in cheapest-first. */
  defaultPolicy: { id: string; strategy: RoutingStrategy; targets: RoutingTarget[]; cacheTtlS: number | null } | null;
}

const CHANNEL = 'projects:changed';
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
  };
}

interface Entry {
  project: CachedProject;
  loadedAt: number;
}

/**
 * In-process cache of project rows and default routing policies, so that a steady-state inference reads no SQL for
 * them. Archive, budget update and routing policy create/update/delete evict the project here before they answer
 * (invalidate(), after commit) and on every other replica through the bus. Loads that raced an eviction are not kept.
 * Entries are refreshed in the background before the TTL ends, so steady traffic never waits for a reload.
 */
export class ProjectCache {
  private readonly entries = new Map<string, Entry>();
  private readonly loading = new Map<string, Promise<CachedProject | null>>();
  private readonly generation = new Map<string, number>();
  private epoch = 0;

  constructor(
    private readonly bus: Bus,
    private readonly load: (projectId: string) => Promise<CachedProject | null>,
    private readonly monotonicNow: () => number = () => performance.now(),
    private readonly ttlMs = PROJECT_CACHE_TTL_MS,
  ) {
    bus.subscribe(CHANNEL, (projectId) => this.evictLocal(projectId));
    bus.onResync(() => this.clear());
  }

  /** The project, or null when it does not exist (not cached). */
  async get(projectId: string): Promise<CachedProject | null> {
    const hit = this.entries.get(projectId);
    const now = this.monotonicNow();
    if (hit) {
      const age = now - hit.loadedAt;
      if (age >= 0 && age < this.ttlMs) {
        if (age >= this.ttlMs * REFRESH_AHEAD) void this.reload(projectId).catch(() => {});
        return hit.project;
      }
    }
    try {
      return await this.reload(projectId);
    } catch (err) {
      // The database did not answer: the row it gave a minute ago beats failing the request.
      if (hit) return hit.project;
      throw err;
    }
  }

  /** Evicts here at once, then tells the other replicas. Call after the change has committed. */
  async invalidate(projectId: string): Promise<void> {
    this.evictLocal(projectId);
    await this.bus.publish(CHANNEL, projectId);
  }

  clear(): void {
    this.epoch++;
    this.entries.clear();
    this.loading.clear();
  }

  private reload(projectId: string): Promise<CachedProject | null> {
    const running = this.loading.get(projectId);
    if (running) return running;
    const token = `${this.epoch}:${this.generation.get(projectId) ?? 0}`;
    const p = this.load(projectId).then(
      (project) => {
        if (this.loading.get(projectId) === p) this.loading.delete(projectId);
        // Read before an eviction that has happened since: that row may be the old one, so it is not kept.
        if (project && token === `${this.epoch}:${this.generation.get(projectId) ?? 0}`) {
          if (this.entries.size >= MAX_ENTRIES) this.entries.clear();
          this.entries.set(projectId, { project, loadedAt: this.monotonicNow() });
        }
        return project;
      },
      (err: unknown) => {
        if (this.loading.get(projectId) === p) this.loading.delete(projectId);
        throw err;
      },
    );
    this.loading.set(projectId, p);
    return p;
  }

  private evictLocal(projectId: string): void {
    this.generation.set(projectId, (this.generation.get(projectId) ?? 0) + 1);
    this.entries.delete(projectId);
    this.loading.delete(projectId);
  }
}
