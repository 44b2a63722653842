/**
 * Where the rate-limit windows live: the store's contract (the limiter's vocabulary of buckets, limits and scaled
 * units). The in-process store (limiter.ts, MemoryLimitStore) and the Redis store (redis/limit-store.ts) implement it.
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
