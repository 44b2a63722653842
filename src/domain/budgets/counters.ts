/**
 * Month-to-date spend per budget scope (`key:<id>`, `project:<id>`), for the request path: read before a call (the
 * budget check) and added to after it, without SQL. PostgreSQL's budget_spend stays the durable record (the outcome
 * writer's batches add to it); a counter is seeded from it the first time a scope is read in a month. In process
 * (MemorySpendCounters, below) or in Redis (RedisSpendCounters, redis/spend-counters.ts).
 */
export interface SpendCounters {
  /** The spend of each scope (all of one project) in `period`; a missing counter is seeded from budget_spend. */
  read(projectId: string, scopes: readonly string[], period: string): Promise<bigint[]>;
  /**
   * Adds `micros` to each scope's counter if it exists. A missing one is not created: it will be seeded from
   * PostgreSQL, which gets this spend through the outcome. Never throws (the durable record is the outcome).
   */
  add(projectId: string, scopes: readonly string[], period: string, micros: bigint): Promise<void>;
  /** Drops counters (a budget was set: scopes without a budget are not counted, so theirs may be behind). */
  forget(projectId: string, scopes: readonly string[], period: string): Promise<void>;
}

/** What budget_spend holds for some scopes of a period (0 for none). */
export type SeedSpend = (scopes: readonly string[], period: string) => Promise<bigint[]>;

export interface CounterOptions {
  seed: SeedSpend;
  /** Runs before a seed read: persists the outcomes this process accepted, so the seed includes them. */
  beforeSeed?: () => Promise<void>;
}

type MemoryEntry = { value: bigint; loading: null } | { value: bigint; loading: Promise<void> };

/**
 * Counters in process (no REDIS_URL: one replica). A counter is seeded once per month from budget_spend after the
 * outcomes accepted so far are persisted; adds that arrive while it loads are kept and added to the seed.
 */
export class MemorySpendCounters implements SpendCounters {
  private readonly entries = new Map<string, MemoryEntry>();
  private latestPeriod = '';

  constructor(private readonly opts: CounterOptions) {}

  async read(_projectId: string, scopes: readonly string[], period: string): Promise<bigint[]> {
    this.forgetOlderThan(period);
    const loads: Promise<void>[] = [];
    const missing: string[] = [];
    for (const s of scopes) {
      const e = this.entries.get(`${s}|${period}`);
      if (!e) missing.push(s);
      else if (e.loading) loads.push(e.loading);
    }
    if (missing.length > 0) loads.push(this.load(missing, period));
    if (loads.length > 0) await Promise.all(loads);
    return scopes.map((s) => this.entries.get(`${s}|${period}`)?.value ?? 0n);
  }

  async add(_projectId: string, scopes: readonly string[], period: string, micros: bigint): Promise<void> {
    if (micros <= 0n) return;
    for (const s of scopes) {
      const e = this.entries.get(`${s}|${period}`);
      if (e) e.value += micros;
    }
  }

  async forget(_projectId: string, scopes: readonly string[], period: string): Promise<void> {
    for (const s of scopes) this.entries.delete(`${s}|${period}`);
  }

  private load(scopes: string[], period: string): Promise<void> {
    const loading = (async () => {
      await this.opts.beforeSeed?.().catch(() => {});
      const seeded = await this.opts.seed(scopes, period);
      scopes.forEach((s, i) => {
        const e = this.entries.get(`${s}|${period}`);
        // `value` holds what was added while loading.
        if (e?.loading === loading) this.entries.set(`${s}|${period}`, { value: e.value + seeded[i]!, loading: null });
      });
    })();
    for (const s of scopes) this.entries.set(`${s}|${period}`, { value: 0n, loading });
    return loading.catch((err: unknown) => {
      for (const s of scopes) if (this.entries.get(`${s}|${period}`)?.loading === loading) this.entries.delete(`${s}|${period}`);
      throw err;
    });
  }

  /** A new month: the last one's counters are not read again. */
  private forgetOlderThan(period: string): void {
    if (period <= this.latestPeriod) return;
    this.latestPeriod = period;
    for (const [k, e] of this.entries) if (!e.loading && k.slice(k.lastIndexOf('|') + 1) < period) this.entries.delete(k);
  }
}
