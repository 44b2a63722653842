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
}

const CHANNEL = 'keys:changed';
/** A safety net only: invalidation is pushed, so an entry this old is re-read even if a message was lost. */
export const KEY_CACHE_TTL_MS = 60_000;
const MAX_ENTRIES = 100_000;

/**
 * In-process cache of authenticated keys, so that a steady-state request runs no SQL to authenticate. A rotate,
 * revoke or scope change evicts the key here before the response is sent and on every other replica through the bus.
 * Expiry and the end of a rotation overlap are checked on every request from the cached timestamps.
 */
export class KeyCache {
  private readonly byHash = new Map<string, { key: CachedKey; loadedAt: number }>();
  private readonly hashesById = new Map<string, Set<string>>();
  /** Bumped by every eviction: a row read before an eviction must not be cached after it (see loadToken). */
  private epoch = 0;

  constructor(private readonly bus: Bus) {
    bus.subscribe(CHANNEL, (keyId) => this.evictLocal(keyId));
    bus.onResync(() => this.clear());
  }

  get(hash: string, nowMs: number): CachedKey | undefined {
    const hit = this.byHash.get(hash);
    if (!hit) return undefined;
    if (nowMs - hit.loadedAt > KEY_CACHE_TTL_MS || nowMs < hit.loadedAt) {
      this.byHash.delete(hash);
      return undefined;
    }
    return hit.key;
  }

  /**
   * Take before reading a key row, pass to set(): a read that raced a revoke (it saw the row before the commit, the
   * eviction ran before it returned) is then not cached, so the revoked key cannot come back from this cache.
   */
  loadToken(): number {
    return this.epoch;
  }

  set(hash: string, key: CachedKey, nowMs: number, token?: number): void {
    if (token !== undefined && token !== this.epoch) return;
    if (this.byHash.size >= MAX_ENTRIES) this.clear();
    this.byHash.set(hash, { key, loadedAt: nowMs });
    let set = this.hashesById.get(key.id);
    if (!set) this.hashesById.set(key.id, (set = new Set()));
    set.add(hash);
  }

  /** Evicts here at once, then tells the other replicas. Call after the change has committed. */
  async invalidate(keyId: string): Promise<void> {
    this.evictLocal(keyId);
    await this.bus.publish(CHANNEL, keyId);
  }

  private evictLocal(keyId: string): void {
    this.epoch++;
    for (const hash of this.hashesById.get(keyId) ?? []) this.byHash.delete(hash);
    this.hashesById.delete(keyId);
  }

  clear(): void {
    this.epoch++;
    this.byHash.clear();
    this.hashesById.clear();
  }
}
