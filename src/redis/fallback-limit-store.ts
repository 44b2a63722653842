import type { Logger } from 'pino';
import type { Redis } from './connection.ts';
import type { ApplyRequest, ApplyResult, BucketSpec, LimitStore, LimiterHealth, VersionedLimits } from '../limits/store.ts';
import { MemoryLimitStore } from '../limits/limiter.ts';
import { isRedisOutage, redisHealthOf, withRedisTimeout, type RedisHealth } from './health.ts';
import type { RedisLimitStore } from './limit-store.ts';

/** Publishing limits (rare, not batched): not answered by then counts as Redis being unreachable. */
const COMMAND_TIMEOUT_MS = 2_000;
/** Scopes whose fallback takes are owed to Redis; past it the oldest are forgotten (logged). */
const MAX_OWED_SCOPES = 10_000;

/** What this replica took from its own windows while Redis was down: applied to Redis (force) when it answers again. */
interface Owed {
  limits: VersionedLimits;
  buckets: Map<string, { resource: BucketSpec['resource']; cost: number; own?: BucketSpec['own'] }>;
}

/**
 * Redis first; while Redis is unreachable, this replica's own in-process windows, so the gateway keeps serving (each
 * replica then enforces the limits on its own). "Unreachable" is the shared Redis health state (health.ts): a
 * connection that is not ready, or a command that failed without an answer, takes every request off Redis at once
 * (none waits for a frozen Redis), until a PING answers again. The switch is logged once each way and shown on /readyz.
 * An error of the script itself (a bug, not an outage) is not hidden behind the fallback.
 *
 * Outages and failovers (CONTRACT §18) must not hand out a fresh window: every answer of Redis is mirrored into the
 * in-process windows (each bucket's used units), so the fallback starts where the shared windows were, and what the
 * fallback admits is owed to Redis and applied there (force) once it answers again. A Sentinel or Cluster failover of
 * a few hundred milliseconds thus admits at most what the windows had left, not a whole window per replica.
 */
export class FallbackLimitStore implements LimitStore {
  private degraded = false;
  readonly local = new MemoryLimitStore();
  private readonly redisHealth: RedisHealth;
  private owed = new Map<string, Owed>();
  /** The newest request time seen (the limiter's clock, which tests inject): owed takes are applied at it. */
  private lastNowMs = 0;

  constructor(
    private readonly primary: RedisLimitStore,
    redis: Redis,
    private readonly log: Logger,
    monotonicNow: () => number = () => performance.now(),
  ) {
    this.redisHealth = redisHealthOf(redis, { log, monotonicNow });
    this.redisHealth.onRecovered(() => void this.settleOwed());
    // ioredis prints connection errors of a client without listeners on every reconnect; the switch above is logged once.
    redis.on('error', (err: Error) => log.debug({ err: err.message }, 'redis connection error'));
  }

  get isDegraded(): boolean {
    return this.degraded;
  }

  async apply(req: ApplyRequest): Promise<ApplyResult> {
    if (req.nowMs > this.lastNowMs) this.lastNowMs = req.nowMs;
    if (this.redisHealth.usable) {
      if (req.mode === 'force') return this.applyPosted(req);
      try {
        // One operation of the turn's batch (batch.ts): the batch's call is watched by the health state and bounded
        // by the client's commandTimeout, so no timer of its own here.
        const result = await this.primary.apply(req);
        this.local.mirror(req, result);
        this.recovered();
        return result;
      } catch (err) {
        return this.refused(req, err);
      }
    }
    this.failed(null);
    return this.applyLocally(req);
  }

  /** Redis refused or did not answer `req`: an outage falls back to this replica's windows; anything else is thrown. */
  private refused(req: ApplyRequest, err: unknown): ApplyResult {
    if (isScriptError(err)) throw err;
    this.redisHealth.report(err);
    // Redis answered with an error of the command itself: not an outage, so no per-replica windows (CONTRACT §18).
    if (!isRedisOutage(err)) throw err;
    this.failed(err);
    return this.applyLocally(req);
  }

  private applyLocally(req: ApplyRequest): ApplyResult {
    const result = this.local.applySync(req);
    if (result.allowed) this.owe(req, result);
    return result;
  }

  /**
   * A settlement (force: never refused) after the provider call: done for the caller once its call is in the kernel's
   * socket buffer (batch.ts post()), so the response does not wait for Redis's answer. The result returned then (the
   * response's X-Svc-RateLimit-* headers) is the script's arithmetic run on this replica's mirror of the windows, which
   * is what Redis computes unless another replica moved them meanwhile; Redis's answer, when it comes, replaces the
   * mirror. Refused or unanswered after the response, the settlement is owed to Redis like a fallback take.
   */
  private async applyPosted(req: ApplyRequest): Promise<ApplyResult> {
    const posted = this.primary.post(req);
    let predicted: ApplyResult | null = null;
    const answered = posted.answer.then(
      (result) => {
        this.local.mirror(req, result);
        this.recovered();
        return result;
      },
      (err: unknown) => {
        if (predicted === null) return this.refused(req, err);
        if (isScriptError(err) || !isRedisOutage(err)) {
          this.log.error({ err: (err as Error).message }, 'Redis refused a settlement of the rate-limit windows');
        } else {
          this.redisHealth.report(err);
          this.failed(err);
          this.owe(req, predicted);
        }
        return predicted;
      },
    );
    if ((await posted.durable) === 'answered') return answered;
    predicted = this.local.applySync(req);
    return predicted;
  }

  private owe(req: ApplyRequest, result: ApplyResult): void {
    let o = this.owed.get(req.scope);
    if (!o) {
      if (this.owed.size >= MAX_OWED_SCOPES) return;
      o = { limits: result.limits, buckets: new Map() };
      this.owed.set(req.scope, o);
    }
    o.limits = result.limits;
    for (let i = 0; i < req.buckets.length; i++) {
      const spec = req.buckets[i]!;
      const applied = result.buckets[i]!.applied;
      if (applied === 0) continue;
      const b = o.buckets.get(spec.id);
      if (b) b.cost += applied;
      else o.buckets.set(spec.id, { resource: spec.resource, cost: applied, ...(spec.own ? { own: spec.own } : {}) });
    }
  }

  /** Applies to Redis what this replica admitted on its own while Redis was down; what Redis misses again stays owed. */
  async settleOwed(): Promise<void> {
    if (this.owed.size === 0) return;
    const owed = this.owed;
    this.owed = new Map();
    const nowMs = this.lastNowMs;
    await Promise.all(
      [...owed].map(async ([scope, o]) => {
        const buckets = [...o.buckets].map(([id, b]) => ({ id, resource: b.resource, cost: b.cost, ...(b.own ? { own: b.own } : {}) }));
        if (buckets.length === 0) return;
        const req: ApplyRequest = { scope, limits: o.limits, mode: 'force', nowMs, buckets };
        try {
          this.local.mirror(req, await this.primary.apply(req));
        } catch {
          if (!this.owed.has(scope)) this.owed.set(scope, o);
        }
      }),
    );
  }

  /** Both stores learn the limits, so that they hold in the fallback too; Redis only when it answers. */
  async publish(scope: string, limits: VersionedLimits): Promise<void> {
    await this.local.publish(scope, limits);
    if (!this.redisHealth.usable) return;
    try {
      await withRedisTimeout(this.redisHealth.watch(this.primary.publish(scope, limits)), COMMAND_TIMEOUT_MS);
    } catch (err) {
      if (isScriptError(err) || !isRedisOutage(err)) throw err;
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
