import type { LRUCache } from 'lru-cache';
import { loadingCache, readThrough } from '../kernel/cache.ts';
import type { Bus } from '../pubsub/bus.ts';
import {
  SCALE,
  type ApplyRequest,
  type ApplyResult,
  type BucketSpec,
  type LimitStore,
  type LimiterHealth,
  type OwnWindow,
  type RateLimits,
  type Resource,
  type VersionedLimits,
} from './store.ts';

/** What the X-Svc-RateLimit-* headers of a response say: the binding window (spec 8.1.6). */
export interface RateLimitState {
  limit: number;
  remaining: number;
  /** Unix seconds: when the window is full again; on a refusal, when a retry would pass. */
  reset: number;
  resource: Resource;
  /** Seconds, only on a refusal. */
  retryAfter?: number;
  /** Which window binds, for error messages: `key`, `project`, `customer` (CONTRACT §22) or `operator`. */
  owner: 'key' | 'project' | 'operator' | 'customer';
}

export interface Decision {
  allowed: boolean;
  state: RateLimitState;
  /** Whole tokens or requests applied per bucket, in the order asked. */
  applied: number[];
}

/**
 * Whose windows: a project key (its own windows and its project's), the operator (its own request window), or a
 * project alone (the operator's inference on that project: the project's request and token windows).
 */
export type WindowOwner =
  | { kind: 'key'; keyId: string; projectId: string; customer?: CustomerWindows }
  | { kind: 'operator' }
  | { kind: 'project'; projectId: string; customer?: CustomerWindows };

/**
 * An end customer's own windows in its project (CONTRACT §22), beside the key's and the project's in the same call: a
 * null rate is no window. `version` (the limits' update time in ms) starts the windows afresh when the limits change.
 */
export interface CustomerWindows {
  id: string;
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
  version: number;
}

/** A customer without a rate of its own has a window it never fills (both halves of the bucket list stay equal). */
const UNBOUNDED_PER_MINUTE = 1_000_000_000;
/** The owners with token windows. */
export type TokenOwner = Exclude<WindowOwner, { kind: 'operator' }>;

export interface LimiterOptions {
  store: LimitStore;
  /** `redis`: windows shared by every replica; `memory`: this process only (no REDIS_URL). */
  kind: 'redis' | 'memory';
  health?: () => Promise<LimiterHealth>;
  /** The project's limits as stored (plan defaults when never set). */
  loadLimits: (projectId: string) => Promise<VersionedLimits>;
  operatorLimits: VersionedLimits;
  bus?: Bus;
  /** How long a project's limits are reused without reading the database; updates evict them at once. */
  cacheTtlMs?: number;
  monotonicNow?: () => number;
}

const LIMITS_CHANGED = 'limits:changed';
/** The limiter scope of failed authentication attempts (never a project id: those start with prj_). */
const AUTH_FAILURES_SCOPE = 'auth-failures';
const MAX_CACHED_PROJECTS = 100_000;

/**
 * The rate limiter of one replica: per-request windows for the caller's key and project, with the project's limits
 * cached briefly in process. Limits changes reach the store at once (the store keeps the newest published version,
 * so every replica's next request uses them) and evict the cache here and, over the bus, on the other replicas.
 */
export class Limiter {
  readonly kind: 'redis' | 'memory';
  /** The projects' limits (kernel/cache.ts: lru-cache), refreshed in the background before their TTL ends. */
  private readonly cache: LRUCache<string, VersionedLimits>;

  constructor(private readonly opts: LimiterOptions) {
    this.kind = opts.kind;
    this.cache = loadingCache({
      ttlMs: opts.cacheTtlMs ?? 10_000,
      max: MAX_CACHED_PROJECTS,
      now: opts.monotonicNow ?? (() => performance.now()),
      load: (projectId) => opts.loadLimits(projectId),
    });
    opts.bus?.subscribe(LIMITS_CHANGED, (projectId) => this.cache.delete(projectId));
    opts.bus?.onResync(() => this.cache.clear());
  }

  async health(): Promise<LimiterHealth> {
    return this.opts.health ? this.opts.health() : 'ok';
  }

  /** A load that an update or an eviction overtook is not kept: the update wins. */
  async limitsFor(projectId: string): Promise<VersionedLimits> {
    return (await readThrough(this.cache, projectId))!;
  }

  /** Call after the update has committed. */
  async limitsChanged(projectId: string, limits: VersionedLimits): Promise<void> {
    this.cache.set(projectId, limits);
    await this.opts.store.publish(projectId, limits);
    await this.opts.bus?.publish(LIMITS_CHANGED, projectId).catch(() => {});
  }

  /** One request from every request window of the owner; the token windows are looked at, not taken. */
  takeRequest(owner: WindowOwner, nowMs: number): Promise<Decision> {
    return this.run(owner, nowMs, 'take', 1, 0);
  }

  /** `tokens` from both token windows, all or nothing; the request windows are looked at for the headers. */
  takeTokens(owner: TokenOwner, nowMs: number, tokens: number): Promise<Decision> {
    return this.run(owner, nowMs, 'take', 0, tokens);
  }

  /** One request and `tokens` from every window of the owner, all or nothing (inference: one round trip). */
  takeRequestAndTokens(owner: TokenOwner, nowMs: number, tokens: number): Promise<Decision> {
    return this.run(owner, nowMs, 'take', 1, tokens);
  }

  /** Gives back (negative) or adds tokens, never refused: a window may go into debt when usage beat the estimate. */
  adjustTokens(owner: TokenOwner, nowMs: number, delta: number): Promise<Decision> {
    return this.run(owner, nowMs, 'force', 0, delta);
  }

  /**
   * Failed authentication attempts from one source (e.g. SCIM's bearer token per client address), in the same store
   * as every other window (Redis: shared by the replicas): `perMinute` failures in a burst, then one more each
   * 60 / perMinute seconds. `count: false` only looks. `retryAfter` (whole seconds) is set while another failure
   * would not fit, that is while the source is throttled; `counted` says whether this failure was counted.
   */
  async authFailures(source: string, perMinute: number, nowMs: number, count: boolean): Promise<{ counted: boolean; retryAfter?: number }> {
    const limits: VersionedLimits = { requestsPerMinute: perMinute, tokensPerMinute: 1, burst: 0, version: 0 };
    const result = await this.opts.store.apply({
      scope: AUTH_FAILURES_SCOPE,
      limits,
      mode: 'take',
      nowMs,
      buckets: [{ id: source, resource: 'requests', cost: count ? 1 : 0 }],
    });
    const { capacity, rate } = bucketShape('requests', limits);
    // Used units after a counted failure, before a refused one: either way, room for one more or not.
    const missing = result.buckets[0]!.used + SCALE - capacity;
    const counted = count && result.allowed;
    return missing > 0 ? { counted, retryAfter: Math.max(1, Math.ceil(missing / rate / 1000)) } : { counted };
  }

  /** The bucket ids of a key's own windows, made once per key (bounded like the store's key memo). */
  private readonly keyBucketIds = new Map<string, readonly [string, string]>();

  private idsOfKey(keyId: string): readonly [string, string] {
    let ids = this.keyBucketIds.get(keyId);
    if (!ids) {
      if (this.keyBucketIds.size >= MAX_CACHED_PROJECTS) this.keyBucketIds.clear();
      ids = [`k:${keyId}:r`, `k:${keyId}:t`];
      this.keyBucketIds.set(keyId, ids);
    }
    return ids;
  }

  private async run(owner: WindowOwner, nowMs: number, mode: 'take' | 'force', requests: number, tokens: number): Promise<Decision> {
    let scope: string;
    let limits: VersionedLimits;
    let buckets: OwnedBucket[];
    if (owner.kind === 'operator') {
      scope = 'operator';
      limits = this.opts.operatorLimits;
      buckets = [{ id: 'op:r', resource: 'requests', cost: requests, owner: 'operator' }];
    } else if (owner.kind === 'project') {
      scope = owner.projectId;
      limits = await this.limitsFor(owner.projectId);
      buckets = [
        { id: 'p:r', resource: 'requests', cost: requests, owner: 'project' },
        { id: 'p:t', resource: 'tokens', cost: tokens, owner: 'project' },
      ];
    } else {
      scope = owner.projectId;
      limits = await this.limitsFor(owner.projectId);
      const [r, t] = this.idsOfKey(owner.keyId);
      buckets = [
        { id: r, resource: 'requests', cost: requests, owner: 'key' },
        { id: 'p:r', resource: 'requests', cost: requests, owner: 'project' },
        { id: t, resource: 'tokens', cost: tokens, owner: 'key' },
        { id: 'p:t', resource: 'tokens', cost: tokens, owner: 'project' },
      ];
    }
    // The customer's windows in the same call (one script operation, the project's hash tag): requests after the
    // request windows, tokens after the token windows, so the list stays requests first, tokens second.
    const customer = owner.kind === 'operator' ? undefined : owner.customer;
    if (customer) {
      const half = buckets.length / 2;
      const perMinute = (n: number | null) => ({ perMinute: n ?? UNBOUNDED_PER_MINUTE, version: customer.version });
      buckets.splice(half, 0, { id: `c:${customer.id}:r`, resource: 'requests', cost: requests, owner: 'customer', own: perMinute(customer.requestsPerMinute) });
      buckets.push({ id: `c:${customer.id}:t`, resource: 'tokens', cost: tokens, owner: 'customer', own: perMinute(customer.tokensPerMinute) });
    }
    // The stores read id, resource and cost; the owner rides along for the headers.
    const result = await this.opts.store.apply({ scope, limits, mode, nowMs, buckets });
    if (result.limits.version > limits.version && owner.kind !== 'operator') {
      // Another replica published newer limits: keep them rather than re-reading stale ones.
      this.cache.set(owner.projectId, result.limits);
    }
    const applied: number[] = new Array(result.buckets.length);
    for (let i = 0; i < applied.length; i++) applied[i] = result.buckets[i]!.applied;
    return { allowed: result.allowed, state: bindingWindow(buckets, result, nowMs), applied };
  }
}

type OwnedBucket = BucketSpec & { owner: RateLimitState['owner'] };

/**
 * The window the headers describe. Refused: of the windows that did not fit, the one a retry must wait for longest.
 * Allowed: the window with the smallest share left (the tighter one binds, spec 8.1.1); on a tie the first in
 * key-requests, project-requests, key-tokens, project-tokens order.
 */
export function bindingWindow(
  buckets: readonly { resource: Resource; owner: RateLimitState['owner']; own?: BucketSpec['own'] }[],
  result: ApplyResult,
  nowMs: number,
): RateLimitState {
  // The first window unless another binds (a window of zero capacity scores NaN and never binds by score).
  let best = 0;
  let bestScore = Infinity;
  let bestRetryAtMs = nowMs;
  for (let i = 0; i < buckets.length; i++) {
    const { capacity, rate } = bucketShape(buckets[i]!.resource, result.limits, buckets[i]!.own);
    const { used, applied } = result.buckets[i]!;
    if (!result.allowed) {
      const missing = used + applied * SCALE - capacity;
      if (applied <= 0 || missing <= 0) continue;
      const retryAtMs = nowMs + Math.ceil(missing / rate);
      // Higher score binds less: the latest retry time wins.
      const score = -retryAtMs;
      if (score < bestScore) {
        bestScore = score;
        best = i;
        bestRetryAtMs = retryAtMs;
      }
      continue;
    }
    const score = (capacity - used) / capacity;
    if (score < bestScore) {
      bestScore = score;
      best = i;
    }
  }
  const spec = buckets[best]!;
  const { capacity, rate } = bucketShape(spec.resource, result.limits, spec.own);
  const used = result.buckets[best]!.used;
  const state: RateLimitState = {
    limit: capacity / SCALE,
    remaining: Math.max(0, Math.floor((capacity - used) / SCALE)),
    reset: 0,
    resource: spec.resource,
    owner: spec.owner,
  };
  if (result.allowed) {
    state.reset = Math.ceil((nowMs + Math.ceil(used / rate)) / 1000);
  } else {
    state.reset = Math.ceil(bestRetryAtMs / 1000);
    state.retryAfter = Math.max(1, Math.ceil((state.reset * 1000 - nowMs) / 1000));
  }
  return state;
}

/** Capacity and rate (scaled units per ms) of a bucket under the given limits (or its own window's). */
export function bucketShape(resource: Resource, limits: RateLimits, own?: OwnWindow): { capacity: number; rate: number } {
  if (own) return { capacity: own.perMinute * SCALE, rate: own.perMinute };
  return resource === 'requests'
    ? { capacity: (limits.requestsPerMinute + limits.burst) * SCALE, rate: limits.requestsPerMinute }
    : { capacity: limits.tokensPerMinute * SCALE, rate: limits.tokensPerMinute };
}

// ---- the in-process store (LimitStore in this process: no REDIS_URL, and the Redis store's fallback) ----

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
