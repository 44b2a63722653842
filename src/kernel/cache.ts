import { LRUCache } from 'lru-cache';

export interface LoadingCacheOptions<V, C> {
  ttlMs: number;
  /** Entries kept at most (least recently used leave first). */
  max: number;
  /** The cache's time in ms (lru-cache's `perf`): the injected clock, or a monotonic one; tests pass their own. */
  now: () => number;
  /** Loads a missing or expired entry; undefined: nothing to cache (the caller gets undefined). */
  load: (key: string, context: C) => Promise<V | undefined>;
  /** Called with each entry that is added, and each that leaves (evicted, expired, deleted, replaced). */
  onInsert?: (value: V, key: string) => void;
  onRemove?: (value: V, key: string) => void;
}

/**
 * lru-cache as the in-process caches (keys, projects, limits) use it: `fetch` loads an entry once however many requests
 * ask for it at the same time; time is read from `now` on every call (ttlResolution 0: no timer, and a fake clock is
 * obeyed at once); a load that an eviction overtook is answered to its callers but not kept (a `delete` aborts the
 * fetch, ignoreFetchAbort lets it finish): the row it read may be the one the eviction was about. A failed reload
 * leaves the entry it was refreshing in place (see readThrough).
 */
export function loadingCache<V extends {}, C = unknown>(opts: LoadingCacheOptions<V, C>): LRUCache<string, V, C> {
  return new LRUCache<string, V, C>({
    // Bounded by count through maxSize (each entry sizes 1), not `max`: with `max` lru-cache allocates its lists for
    // every slot up front (about 4.4 MB for 100,000 slots with a TTL, whether one key is cached or all of them).
    maxSize: opts.max,
    sizeCalculation: () => 1,
    ttl: opts.ttlMs,
    ttlResolution: 0,
    perf: { now: opts.now },
    fetchMethod: (key, _stale, { context }) => opts.load(key, context),
    ignoreFetchAbort: true,
    noDeleteOnFetchRejection: true,
    onInsert: opts.onInsert,
    dispose: opts.onRemove,
  });
}

/**
 * lru-cache's rejection of a fetch that an eviction, delete or replacement overtook and whose load found nothing: with
 * ignoreFetchAbort a load that returns a value is answered, but one that returns undefined rejects with the abort's
 * reason (Error('deleted') etc.). For the caller that is "nothing found", not a failure (a key revoked while it was being
 * read must get 401, not 500).
 */
export function isAbortOfEmptyLoad(err: unknown): boolean {
  return err instanceof Error && (err.message === 'deleted' || err.message === 'evicted' || err.message === 'replaced');
}

/** cache.fetch, with an overtaken load that found nothing answered as undefined (see isAbortOfEmptyLoad). */
export async function fetchEntry<V extends {}, C>(cache: LRUCache<string, V, C>, key: string, options: LRUCache.FetchOptions<string, V, C>): Promise<V | undefined> {
  try {
    return await cache.fetch(key, options as never);
  } catch (err) {
    if (isAbortOfEmptyLoad(err)) return undefined;
    throw err;
  }
}

/**
 * A read of rows that change rarely and are evicted when they do. Fresh: the cached entry; past `refreshAt` of its TTL
 * it is still answered and a reload starts in the background, so steady traffic never waits for one. Missing or
 * expired: the load, shared with any already running. The load failing (the database did not answer): the last entry,
 * however old, beats failing the request.
 */
export async function readThrough<V extends {}>(cache: LRUCache<string, V, unknown>, key: string, refreshAt = 0.8): Promise<V | undefined> {
  const left = cache.getRemainingTTL(key);
  const fresh = left > 0;
  if (fresh && left <= cache.ttl * (1 - refreshAt)) void cache.fetch(key, { forceRefresh: true, allowStale: true }).catch(() => {});
  try {
    // allowStale while fresh: during a background reload the entry being refreshed is answered, not waited for.
    return await cache.fetch(key, { allowStale: fresh });
  } catch (err) {
    if (isAbortOfEmptyLoad(err)) return undefined;
    // A failed load leaves the entry it was reloading in place (noDeleteOnFetchRejection).
    const last = cache.peek(key, { allowStale: true });
    if (last !== undefined) return last;
    throw err;
  }
}
