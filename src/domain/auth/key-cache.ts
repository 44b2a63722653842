import type { LRUCache } from 'lru-cache';
import { fetchEntry, loadingCache } from '../../kernel/cache.ts';
import type { Clock } from '../../kernel/clock.ts';
import type { Bus } from '../../pubsub/bus.ts';

/** What authentication needs of a key row, cached by secret digest. */
export interface CachedKey {
  id: string;
  projectId: string;
  scopes: string[];
  status: string;
  expiresAt: Date | null;
  secretHash: string;
  previousSecretHash: string | null;
  previousExpiresAt: Date | null;
  lastUsedAt: Date | null;
  /** Monthly budget in micro-dollars; a key's budget is fixed at creation, so the cached value never goes stale. */
  budgetMicros: bigint | null;
  /** CONTRACT §22: the key's model list (empty: every model); a change evicts the key like a revoke. */
  models?: string[];
}

type LoadKey = () => Promise<CachedKey | null>;

const CHANNEL = 'keys:changed';
/** A safety net only: invalidation is pushed, so an entry this old is re-read even if a message was lost. */
export const KEY_CACHE_TTL_MS = 60_000;
const MAX_ENTRIES = 100_000;

/**
 * In-process cache of authenticated keys (lru-cache, on the injected clock), so that a steady-state request runs no SQL
 * to authenticate. A rotate, revoke or scope change evicts the key here before the response is sent and on every other
 * replica through the bus. Expiry and the end of a rotation overlap are checked on every request from the cached
 * timestamps. Only active keys are cached: unknown secrets must not be able to fill the cache.
 */
export class KeyCache {
  private readonly byHash: LRUCache<string, CachedKey, LoadKey>;
  /** The digests cached per key (current and previous secret), so that an eviction by key id finds them. */
  private readonly hashesById = new Map<string, Set<string>>();
  /**
   * The digests being loaded by fetch(). Their key ids are not known until the row is read, so every eviction drops
   * them all: a row read before an eviction must not be cached after it.
   */
  private readonly loading = new Set<{ hash: string }>();

  constructor(
    private readonly bus: Bus,
    private readonly clock: Clock,
  ) {
    this.byHash = loadingCache<CachedKey, LoadKey>({
      ttlMs: KEY_CACHE_TTL_MS,
      max: MAX_ENTRIES,
      now: () => clock.now(),
      load: async (hash, load) => {
        const loading = { hash };
        this.loading.add(loading);
        try {
          const key = await load();
          return key?.status === 'active' ? key : undefined;
        } finally {
          this.loading.delete(loading);
        }
      },
      onInsert: (key, hash) => {
        let hashes = this.hashesById.get(key.id);
        if (!hashes) this.hashesById.set(key.id, (hashes = new Set()));
        hashes.add(hash);
      },
      onRemove: (key, hash) => {
        const hashes = this.hashesById.get(key.id);
        hashes?.delete(hash);
        if (hashes?.size === 0) this.hashesById.delete(key.id);
      },
    });
    bus.subscribe(CHANNEL, (keyId) => this.evictLocal(keyId));
    bus.onResync(() => this.clear());
  }

  /**
   * The active key with this secret digest: cached, or loaded by `load` once for all the requests asking at the same
   * time. A load that an eviction overtook (it may have read the row before the revoke committed) is answered but not
   * cached, so a revoked key cannot come back from this cache.
   */
  async fetch(hash: string, load: LoadKey): Promise<CachedKey | undefined> {
    this.dropIfClockWentBack(hash);
    return fetchEntry(this.byHash, hash, { context: load });
  }

  /** The cached active key, if any: synchronous, for the hit path. A miss goes through fetch(). */
  get(hash: string): CachedKey | undefined {
    this.dropIfClockWentBack(hash);
    return this.byHash.get(hash);
  }

  /** Evicts here at once, then tells the other replicas. Call after the change has committed. */
  async invalidate(keyId: string): Promise<void> {
    this.evictLocal(keyId);
    await this.bus.publish(CHANNEL, keyId);
  }

  clear(): void {
    this.byHash.clear();
    this.hashesById.clear();
  }

  private evictLocal(keyId: string): void {
    // Deleting a digest being loaded aborts its fetch: its callers get the row, the cache does not keep it.
    const hashes = [...(this.hashesById.get(keyId) ?? []), ...[...this.loading].map((l) => l.hash)];
    for (const hash of hashes) this.byHash.delete(hash);
    this.hashesById.delete(keyId);
  }

  /** An entry loaded "in the future" (the clock was set back) is not trusted: its age is unknown. */
  private dropIfClockWentBack(hash: string): void {
    if (this.byHash.getRemainingTTL(hash) > KEY_CACHE_TTL_MS) this.byHash.delete(hash);
  }
}
