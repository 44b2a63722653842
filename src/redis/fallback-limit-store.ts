import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { MemoryLimitStore } from '../limits/memory-store.ts';
import type { ApplyRequest, ApplyResult, LimitStore, LimiterHealth, VersionedLimits } from '../limits/types.ts';
import { redisHealthOf, withRedisTimeout, type RedisHealth } from './health.ts';
import type { RedisLimitStore } from './limit-store.ts';

/** Publishing limits (rare, not batched): not answered by then counts as Redis being unreachable. */
const COMMAND_TIMEOUT_MS = 2_000;

/**
 * Redis first; while Redis is unreachable, this replica's own in-process windows, so the gateway keeps serving (each
 * replica then enforces the limits on its own). "Unreachable" is the shared Redis health state (health.ts): a
 * connection that is not ready, or a command that failed without an answer, takes every request off Redis at once
 * (none waits for a frozen Redis), until a PING answers again. The switch is logged once each way and shown on /readyz.
 * An error of the script itself (a bug, not an outage) is not hidden behind the fallback.
 */
export class FallbackLimitStore implements LimitStore {
  private degraded = false;
  readonly local = new MemoryLimitStore();
  private readonly redisHealth: RedisHealth;

  constructor(
    private readonly primary: RedisLimitStore,
    redis: Redis,
    private readonly log: Logger,
    monotonicNow: () => number = () => performance.now(),
  ) {
    this.redisHealth = redisHealthOf(redis, { log, monotonicNow });
    // ioredis prints connection errors of a client without listeners on every reconnect; the switch above is logged once.
    redis.on('error', (err: Error) => log.debug({ err: err.message }, 'redis connection error'));
  }

  get isDegraded(): boolean {
    return this.degraded;
  }

  async apply(req: ApplyRequest): Promise<ApplyResult> {
    if (this.redisHealth.usable) {
      try {
        // One operation of the turn's batch (batch.ts): the batch's call is watched by the health state and bounded
        // by the client's commandTimeout, so no timer of its own here.
        const result = await this.primary.apply(req);
        this.recovered();
        return result;
      } catch (err) {
        if (isScriptError(err)) throw err;
        this.redisHealth.report(err);
        this.failed(err);
      }
    } else {
      this.failed(null);
    }
    return this.local.applySync(req);
  }

  /** Both stores learn the limits, so that they hold in the fallback too; Redis only when it answers. */
  async publish(scope: string, limits: VersionedLimits): Promise<void> {
    await this.local.publish(scope, limits);
    if (!this.redisHealth.usable) return;
    try {
      await withRedisTimeout(this.redisHealth.watch(this.primary.publish(scope, limits)), COMMAND_TIMEOUT_MS);
    } catch (err) {
      if (isScriptError(err)) throw err;
      this.redisHealth.report(err);
      this.failed(err);
    }
  }

  /** For /readyz: while degraded (or Redis is down), asks Redis (a PING), so that recovery shows without traffic. */
  async health(): Promise<LimiterHealth> {
    if (this.degraded || !this.redisHealth.usable) {
      if (await this.redisHealth.check()) this.recovered();
      else this.failed(null);
    }
    return this.degraded ? 'degraded' : 'ok';
  }

  private failed(err: unknown): void {
    if (this.degraded) return;
    this.degraded = true;
    this.log.error(
      { err: err instanceof Error ? err.message : (err ?? 'Redis does not answer') },
      'Redis is unreachable: rate limits fall back to per-replica in-process windows until it answers again',
    );
  }

  private recovered(): void {
    if (!this.degraded) return;
    this.degraded = false;
    this.log.warn('Redis answers again: rate limits are shared across replicas again');
  }
}

function isScriptError(err: unknown): boolean {
  const message = err instanceof Error ? err.message : '';
  return /^ERR .*script/i.test(message) || /user_script/.test(message);
}
