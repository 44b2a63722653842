import type { Redis } from './connection.ts';
import type { Logger } from 'pino';
import type { CounterOptions, SpendCounters } from '../domain/budgets/counters.ts';
import { redisBatchOf, type RedisBatch } from './batch.ts';
import { redisHealthOf, withRedisTimeout, type RedisHealth } from './health.ts';

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
 * counters that exist) after it, each an operation of the shared batch (batch.ts), so they travel in the
 * limiter's script call. While Redis does not answer (the shared health state of health.ts: nothing is
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
    // Posted operations of the turn's batch (batch.ts): the add is done for the caller once its call is in the
    // kernel's socket buffer (the response need not wait for Redis's answer); the owed ones are rare (after an outage).
    // Refused or unanswered, whenever that is found out, the add is kept for later.
    const adds: [string[], bigint][] = [...(keys.length > 0 ? [[keys, micros] as [string[], bigint]] : []), ...owed.map(([k, v]): [string[], bigint] => [[k], v])];
    await Promise.all(adds.map(([k, v]) => this.post(k, v)));
  }

  private async post(keys: string[], micros: bigint): Promise<void> {
    const posted = this.batch.post('A', keys, [micros.toString()]);
    const kept = posted.answer.then(
      () => {},
      (err: unknown) => {
        this.log.debug({ err: (err as Error).message }, 'spend counters: Redis did not answer; the add is kept for later');
        this.owe(keys, micros);
      },
    );
    if ((await posted.durable) === 'answered') await kept;
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
