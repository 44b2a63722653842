import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { redisBatchOf, type RedisBatch } from '../../limits/redis-batch.ts';
import { redisHealthOf, withRedisTimeout, type RedisHealth } from '../../limits/redis-health.ts';

/**
 * Month-to-date spend per budget scope (`key:<id>`, `project:<id>`), for the request path: read before a call (the
 * budget check) and added to after it, without SQL. PostgreSQL's budget_spend stays the durable record (the outcome
 * writer's batches add to it); a counter is seeded from it the first time a scope is read in a month.
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

/** Unix seconds a week after `period` ("YYYY-MM") ends: a counter outlives its month a little, then goes. */
export function counterExpiry(period: string): number {
  const [y, m] = period.split('-').map(Number) as [number, number];
  return Math.floor(Date.UTC(y, m, 1) / 1000) + 7 * 86_400;
}

/** Seeds the counter with ARGV[1] unless another replica did first; returns the counter's value either way. */
const SEED_LUA = `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EXAT', ARGV[2]) then return ARGV[1] end
return redis.call('GET', KEYS[1])
`;

type CounterCommands = {
  svcSpendSeed(key: string, value: string, expiresAt: number): Promise<string>;
};

/** The seed and forget commands (rare, not batched): not answered by then, the fallback is right there. */
const COMMAND_TIMEOUT_MS = 500;
const MAX_OWED = 10_000;

/**
 * Counters in Redis, shared by every replica: `<prefix>spend:{<project>}:<scope>:<period>` (the project's hash tag keeps
 * a request's counters in one Cluster slot). Steady state: a read (MGET) before the call and an add (INCRBY on the
 * counters that exist) after it, each an operation of the shared batch (limits/redis-batch.ts), so they travel in the
 * limiter's script call. While Redis does not answer (the shared health state of limits/redis-health.ts: nothing is
 * sent then), reads come from budget_spend (one SQL statement) and adds are kept and applied once it answers again.
 */
export class RedisSpendCounters implements SpendCounters {
  private readonly commands: CounterCommands;
  /** Adds that Redis refused, by counter key: applied (to counters that still exist) on the next add that succeeds. */
  private readonly owed = new Map<string, bigint>();
  private readonly redisHealth: RedisHealth;
  private readonly batch: RedisBatch;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly opts: CounterOptions,
    private readonly log: Logger,
  ) {
    this.redisHealth = redisHealthOf(redis, { log });
    this.batch = redisBatchOf(redis);
    const r = redis as unknown as Partial<CounterCommands>;
    if (typeof r.svcSpendSeed !== 'function') redis.defineCommand('svcSpendSeed', { lua: SEED_LUA, numberOfKeys: 1 });
    this.commands = redis as unknown as CounterCommands;
  }

  key(projectId: string, scope: string, period: string): string {
    return `${this.prefix}spend:{${projectId}}:${scope}:${period}`;
  }

  async read(projectId: string, scopes: readonly string[], period: string): Promise<bigint[]> {
    if (!this.redisHealth.usable) return this.opts.seed(scopes, period);
    const keys = scopes.map((s) => this.key(projectId, s, period));
    let values: (string | null)[];
    try {
      values = await this.batch.run<(string | null)[]>('M', keys);
    } catch (err) {
      this.log.debug({ err: (err as Error).message }, 'spend counters: Redis did not answer; reading budget_spend');
      return this.opts.seed(scopes, period);
    }
    if (values.every((v) => v !== null)) return values.map((v) => BigInt(v!));
    // First use this month (or after Redis lost the key): seed from PostgreSQL; SET NX lets one replica win.
    await this.opts.beforeSeed?.().catch(() => {});
    const missing = scopes.filter((_, i) => values[i] === null);
    const seeded = await this.opts.seed(missing, period);
    const expiresAt = counterExpiry(period);
    let m = 0;
    const pending = scopes.map((_, i) =>
      values[i] !== null ? values[i]! : this.commands.svcSpendSeed(keys[i]!, String(seeded[m++]!), expiresAt),
    );
    try {
      return (await withRedisTimeout(this.redisHealth.watch(Promise.all(pending)), COMMAND_TIMEOUT_MS)).map((v) => BigInt(v));
    } catch (err) {
      // The seed is what budget_spend says: right for this request, and another one will store it.
      this.log.debug({ err: (err as Error).message }, 'spend counters: Redis did not take the seed; using budget_spend');
      m = 0;
      return scopes.map((_, i) => (values[i] !== null ? BigInt(values[i]!) : seeded[m++]!));
    }
  }

  async add(projectId: string, scopes: readonly string[], period: string, micros: bigint): Promise<void> {
    if (micros <= 0n && this.owed.size === 0) return;
    const keys = micros > 0n ? scopes.map((s) => this.key(projectId, s, period)) : [];
    if (!this.redisHealth.usable) return this.owe(keys, micros);
    const owed = this.owed.size > 0 ? [...this.owed] : [];
    this.owed.clear();
    try {
      // Operations of the turn's batch; the owed ones are rare (after an outage).
      await Promise.all([
        keys.length > 0 ? this.batch.run('A', keys, [micros.toString()]) : 0,
        ...owed.map(([k, v]) => this.batch.run('A', [k], [v.toString()])),
      ]);
    } catch (err) {
      this.log.debug({ err: (err as Error).message }, 'spend counters: Redis did not answer; the add is kept for later');
      for (const [k, v] of owed) this.owe([k], v);
      this.owe(keys, micros);
    }
  }

  async forget(projectId: string, scopes: readonly string[], period: string): Promise<void> {
    if (scopes.length === 0 || !this.redisHealth.usable) return;
    await withRedisTimeout(this.redisHealth.watch(this.redis.del(...scopes.map((s) => this.key(projectId, s, period)))), COMMAND_TIMEOUT_MS).catch(() => {});
  }

  private owe(keys: string[], micros: bigint): void {
    for (const k of keys) {
      if (!this.owed.has(k) && this.owed.size >= MAX_OWED) continue;
      this.owed.set(k, (this.owed.get(k) ?? 0n) + micros);
    }
  }
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
