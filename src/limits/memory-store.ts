import { SCALE, bucketShape, type ApplyRequest, type ApplyResult, type LimitStore, type VersionedLimits } from './types.ts';

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
