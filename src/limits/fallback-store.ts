import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { MemoryLimitStore } from './memory-store.ts';
import type { RedisLimitStore } from './redis-store.ts';
import type { ApplyRequest, ApplyResult, LimitStore, LimiterHealth, VersionedLimits } from './types.ts';

/** A command that has not answered by then counts as Redis being unreachable. */
const COMMAND_TIMEOUT_MS = 2_000;
/** After a command failed on a connection that looked healthy, Redis is left alone for this long. */
const RETRY_AFTER_FAILURE_MS = 5_000;

/**
 * Redis first; while Redis is unreachable, this replica's own in-process windows, so the gateway keeps serving (each
 * replica then enforces the limits on its own). The switch is logged once each way and shown on /readyz; the way
 * back is automatic: ioredis reconnects in the background and the next call after that uses Redis again.
 * An error of the script itself (a bug, not an outage) is not hidden behind the fallback.
 */
export class FallbackLimitStore implements LimitStore {
  private degraded = false;
  private quietUntil = 0;
  readonly local = new MemoryLimitStore();

  constructor(
    private readonly primary: RedisLimitStore,
    private readonly redis: Redis,
    private readonly log: Logger,
    private readonly monotonicNow: () => number = () => performance.now(),
  ) {
    // ioredis prints connection errors of a client without listeners on every reconnect; the switch above is logged once.
    redis.on('error', (err: Error) => log.debug({ err: err.message }, 'redis connection error'));
  }

  get isDegraded(): boolean {
    return this.degraded;
  }

  async apply(req: ApplyRequest): Promise<ApplyResult> {
    if (this.redisUsable()) {
      try {
        const result = await withTimeout(this.primary.apply(req), COMMAND_TIMEOUT_MS);
        this.recovered();
        return result;
      } catch (err) {
        if (isScriptError(err)) throw err;
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
    if (!this.redisUsable()) return;
    try {
      await withTimeout(this.primary.publish(scope, limits), COMMAND_TIMEOUT_MS);
    } catch (err) {
      if (isScriptError(err)) throw err;
      this.failed(err);
    }
  }

  /** For /readyz: while degraded, tries Redis once, so that recovery shows even without traffic. */
  async health(): Promise<LimiterHealth> {
    if (this.degraded && this.redis.status === 'ready') {
      try {
        await withTimeout(this.redis.ping(), COMMAND_TIMEOUT_MS);
        this.quietUntil = 0;
        this.recovered();
      } catch {
        // still unreachable
      }
    }
    return this.degraded ? 'degraded' : 'ok';
  }

  private redisUsable(): boolean {
    // Not 'ready' means ioredis is reconnecting: queueing the call would make the request wait for it.
    return this.redis.status === 'ready' && this.monotonicNow() >= this.quietUntil;
  }

  private failed(err: unknown): void {
    if (err) this.quietUntil = this.monotonicNow() + RETRY_AFTER_FAILURE_MS;
    if (this.degraded) return;
    this.degraded = true;
    this.log.error(
      { err: err instanceof Error ? err.message : (err ?? `redis connection ${this.redis.status}`) },
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

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Redis did not answer within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
