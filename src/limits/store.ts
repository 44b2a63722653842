/**
 * Where the rate-limit windows live: the store's contract (the limiter's vocabulary of buckets, limits and scaled
 * units) and the in-process store. The Redis store (redis/limit-store.ts) implements the same contract.
 *
 * The vocabulary. Every window is a token bucket kept as "used" units that drain at the window's rate:
 *   requests: capacity requests_per_minute + burst, refilled at requests_per_minute per minute;
 *   tokens:   capacity tokens_per_minute (burst does not raise it, spec 8.1.4), refilled at tokens_per_minute per minute.
 * Amounts are scaled by SCALE (60,000 units per request or token) so that a window drains by exactly `per_minute`
 * units per millisecond: every quantity is an integer and both stores compute the same numbers, with no float drift.
 */
export const SCALE = 60_000;

export type Resource = 'requests' | 'tokens';

export interface RateLimits {
  requestsPerMinute: number;
  tokensPerMinute: number;
  burst: number;
}

/**
 * Limits with their version (the update's time in ms; 0 for plan defaults). A window last written under another
 * version starts afresh: new limits take effect on the next request, with a full window.
 */
export interface VersionedLimits extends RateLimits {
  version: number;
}

export interface BucketSpec {
  /** Unique within the scope, e.g. `k:key_…:r` or `p:t`. */
  id: string;
  resource: Resource;
  /**
   * Whole requests or tokens. `take`: all buckets must fit or nothing is taken (0 = look without taking);
   * `force`: applied unconditionally, negative amounts give back (settling a token reservation).
   */
  cost: number;
  /**
   * A window with its own per-minute rate and version instead of the scope's limits (an end customer's, CONTRACT §22):
   * capacity `perMinute` (no burst), refilled at `perMinute` a minute; a bucket last written under another version
   * starts afresh.
   */
  own?: OwnWindow;
}

/** An own window's shape: see BucketSpec.own. */
export interface OwnWindow {
  perMinute: number;
  version: number;
}

export interface ApplyRequest {
  /** The hash tag of every key of the call: a project id, or `operator`. */
  scope: string;
  /** The limits the caller knows; a newer version published by another replica wins inside the store. */
  limits: VersionedLimits;
  mode: 'take' | 'force';
  nowMs: number;
  buckets: BucketSpec[];
}

export interface BucketOutcome {
  /** Used units (scaled) after the call when allowed, before it when refused. */
  used: number;
  /** What was applied, in whole requests/tokens (a take larger than the window is cut to its capacity). */
  applied: number;
}

export interface ApplyResult {
  allowed: boolean;
  /** The limits the store applied (its own newer published version, or the caller's). */
  limits: VersionedLimits;
  buckets: BucketOutcome[];
}

/** Where windows live: Redis (shared by every replica) or this process. */
export interface LimitStore {
  apply(req: ApplyRequest): Promise<ApplyResult>;
  /** Makes new limits visible to the next call on every replica sharing the store. */
  publish(scope: string, limits: VersionedLimits): Promise<void>;
}

export type LimiterHealth = 'ok' | 'degraded';

/** Capacity and rate (scaled units per ms) of a bucket under the given limits (or its own window's). */
export function bucketShape(resource: Resource, limits: RateLimits, own?: OwnWindow): { capacity: number; rate: number } {
  if (own) return { capacity: own.perMinute * SCALE, rate: own.perMinute };
  return resource === 'requests'
    ? { capacity: (limits.requestsPerMinute + limits.burst) * SCALE, rate: limits.requestsPerMinute }
    : { capacity: limits.tokensPerMinute * SCALE, rate: limits.tokensPerMinute };
}

// ---- the in-process store ----

interface Bucket {
  used: number;
  at: number;
  version: number;
  /** When the bucket is full again, and can be forgotten (Redis: the key's PEXPIRE). */
  expiresAt: number;
}

const SWEEP_EVERY = 10_000;

/**
 * The in-process store: the Redis script's rules (redis/limit-store.ts), in JavaScript. A call runs synchronously from
 * start to end, so it is as atomic within this process as the script is within Redis.
 */
export class MemoryLimitStore implements LimitStore {
  private readonly buckets = new Map<string, Bucket>();
  private readonly published = new Map<string, VersionedLimits>();
  private calls = 0;

  async apply(req: ApplyRequest): Promise<ApplyResult> {
    return this.applySync(req);
  }

  applySync(req: ApplyRequest): ApplyResult {
    if (++this.calls % SWEEP_EVERY === 0) this.sweep(req.nowMs);
    const now = req.nowMs;
    const force = req.mode === 'force';
    let limits = req.limits;
    const published = this.published.get(req.scope);
    if (published && published.version >= limits.version) limits = published;
    else if (limits.version > 0) this.published.set(req.scope, { ...limits });

    const state = req.buckets.map((spec) => {
      const { capacity, rate } = bucketShape(spec.resource, limits, spec.own);
      const version = spec.own ? spec.own.version : limits.version;
      const key = `${req.scope}:${spec.id}`;
      const stored = this.buckets.get(key);
      let used = 0;
      let at = now;
      if (stored && stored.version === version) {
        used = stored.used;
        at = stored.at;
        if (now > at) {
          used = Math.max(0, used - (now - at) * rate);
          at = now;
        }
      }
      let cost = Math.trunc(spec.cost);
      if (!force && cost > capacity / SCALE) cost = capacity / SCALE;
      return { key, stored, capacity, rate, used, at, cost, version };
    });
    const allowed = force || state.every((s) => s.cost <= 0 || s.used + s.cost * SCALE <= s.capacity);

    const buckets = state.map((s) => {
      let used = s.used;
      if (allowed && s.cost !== 0) {
        used = Math.max(0, used + s.cost * SCALE);
        // A drained bucket is kept (it equals a missing one) and updated in place: deleting and adding it back on
        // every request would churn the long-lived map (kernel/in-flight.ts says what that costs). sweep() forgets it.
        const expiresAt = s.at + Math.ceil(used / s.rate) + 60_000;
        const b = s.stored;
        if (b) {
          b.used = used;
          b.at = s.at;
          b.version = s.version;
          b.expiresAt = expiresAt;
        } else this.buckets.set(s.key, { used, at: s.at, version: s.version, expiresAt });
      }
      return { used, applied: s.cost };
    });
    return { allowed, limits: { ...limits }, buckets };
  }

  /**
   * Takes over what another store (Redis) answered for `req`: each bucket's used units as of `req.nowMs`. The fallback
   * store (redis/fallback-limit-store.ts) keeps these, so that a Redis outage or failover starts the per-replica
   * windows where the shared ones were, never with a whole fresh window.
   */
  mirror(req: ApplyRequest, result: ApplyResult): void {
    if (++this.calls % SWEEP_EVERY === 0) this.sweep(req.nowMs);
    const v = result.limits.version;
    if (v > 0) {
      const current = this.published.get(req.scope);
      if (!current || current.version < v) this.published.set(req.scope, result.limits);
    }
    for (let i = 0; i < req.buckets.length; i++) {
      const spec = req.buckets[i]!;
      const used = result.buckets[i]!.used;
      const key = `${req.scope}:${spec.id}`;
      const expiresAt = req.nowMs + Math.ceil(used / bucketShape(spec.resource, result.limits, spec.own).rate) + 60_000;
      const bv = spec.own ? spec.own.version : v;
      const b = this.buckets.get(key);
      if (b) {
        b.used = used;
        b.at = req.nowMs;
        b.version = bv;
        b.expiresAt = expiresAt;
      } else if (used > 0) this.buckets.set(key, { used, at: req.nowMs, version: bv, expiresAt });
    }
  }

  async publish(scope: string, limits: VersionedLimits): Promise<void> {
    const current = this.published.get(scope);
    if (!current || current.version < limits.version) this.published.set(scope, { ...limits });
  }

  /** Drops buckets that have refilled completely (they equal a missing bucket): once per SWEEP_EVERY calls. */
  private sweep(nowMs: number): void {
    for (const [key, b] of this.buckets) if (b.expiresAt <= nowMs) this.buckets.delete(key);
  }

  get size(): number {
    return this.buckets.size;
  }
}
