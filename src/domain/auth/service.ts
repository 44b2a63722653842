import { hash as cryptoHash, randomInt, timingSafeEqual } from 'node:crypto';
import type { LRUCache } from 'lru-cache';
import { SvcError } from '../../errors/svc-error.ts';
import { fetchEntry, loadingCache } from '../../kernel/cache.ts';
import type { Clock } from '../../kernel/clock.ts';
import type { Bus } from '../../pubsub/bus.ts';
import type { Caller } from '../context.ts';
import type { AuthPorts, CachedKey } from './ports.ts';
import { SCOPES, type Scope } from '../keys/scopes.ts';

/**
 * Authentication by API key: the secret (made, hashed, compared in constant time), the in-process cache of
 * authenticated keys, and the caller a bearer secret resolves to.
 */

// ---- the secret ----

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
export const KEY_PREFIX = 'svc_sk_';

/** `svc_sk_` + 48 base62 characters from the CSPRNG: about 285 bits (CONTRACT §3 asks for at least 238). */
export function generateSecret(): string {
  let out = KEY_PREFIX;
  for (let i = 0; i < 48; i++) out += BASE62[randomInt(62)];
  return out;
}

export function hashSecret(secret: string): string {
  // One-shot (Node ≥ 20.12): no Hash object per authenticated request.
  return cryptoHash('sha256', secret, 'hex');
}

/** The secret's SHA-256 digest as bytes (compare with digestEquals) and as the hex stored in the database. */
export function digestSecret(secret: string): { bytes: Buffer; hex: string } {
  const bytes = cryptoHash('sha256', secret, 'buffer');
  return { bytes, hex: bytes.toString('hex') };
}

/** Stored digests decoded once (the master key's and the cached keys' are compared on every request); bounded. */
const decoded = new Map<string, Buffer>();
const MAX_DECODED = 10_000;

/** Constant-time: `bytes` against a stored hex digest. */
export function digestEquals(bytes: Buffer, hex: string): boolean {
  let other = decoded.get(hex);
  if (!other) {
    other = Buffer.from(hex, 'hex');
    if (decoded.size >= MAX_DECODED) decoded.clear();
    decoded.set(hex, other);
  }
  return other.length === bytes.length && timingSafeEqual(bytes, other);
}

export function safeEqualHex(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'hex');
  const bb = Buffer.from(b, 'hex');
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}

/** The redacted form shown on retrieve and list: `svc_sk_...` + the last four characters. */
export const redactSecret = (last4: string): string => `${KEY_PREFIX}...${last4}`;

// ---- the key cache ----

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

// ---- the caller ----

export const OPERATOR_KEY_ID = 'key_master';

/**
 * The caller a key row acts as: on a request (authenticate), and in the background work done as the key that asked
 * (batches, evaluations, the verticals, RAG indexing, approved changes). Its model list rides along (CONTRACT §22).
 */
export function keyCaller(key: { id: string; projectId: string; scopes: readonly string[]; budgetMicros: bigint | null; models?: readonly string[] | null }): Caller {
  return {
    kind: 'key',
    keyId: key.id,
    projectId: key.projectId,
    scopes: key.scopes as Scope[],
    budgetMicros: key.budgetMicros,
    models: key.models && key.models.length > 0 ? key.models : null,
  };
}

const invalidKey = () => new SvcError('invalid_api_key');
const LAST_USED_RESOLUTION_MS = 60_000;

/** Parses `Authorization: Bearer svc_sk_…`; anything else is 401 invalid_api_key. */
export function bearerSecret(header: string | undefined): string {
  if (!header) throw new SvcError('invalid_api_key', { message: 'No API key: send Authorization: Bearer <API_KEY>.' });
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match || !match[1]!.startsWith(KEY_PREFIX) || match[1]!.length > 200) throw invalidKey();
  return match[1]!;
}

/**
 * Resolves a secret to its caller. Secrets are compared by SHA-256 digest: the database finds the row by the digest's
 * unique index, and the digest is compared again in constant time. Revoked, expired and past-overlap secrets are 401.
 */
export async function authenticate(ports: AuthPorts, header: string | undefined): Promise<Caller> {
  const secret = bearerSecret(header);
  const digest = digestSecret(secret);
  const hash = digest.hex;
  if (digestEquals(digest.bytes, ports.masterKeyHash)) {
    return { kind: 'operator', keyId: OPERATOR_KEY_ID, projectId: null, scopes: SCOPES };
  }
  const now = ports.clock.now();
  // A hit is synchronous (no promise on the hot path); a miss loads once for every request asking at the same time.
  // Only active keys are cached: unknown secrets must not be able to fill the cache.
  const key: CachedKey | undefined = ports.keys.get(hash) ?? (await ports.keys.fetch(hash, () => loadKey(ports, hash)));
  if (!key || key.status !== 'active') throw invalidKey();
  if (key.expiresAt && key.expiresAt.getTime() <= now) throw invalidKey();
  const current = digestEquals(digest.bytes, key.secretHash);
  const previous =
    !current &&
    key.previousSecretHash !== null &&
    digestEquals(digest.bytes, key.previousSecretHash) &&
    key.previousExpiresAt !== null &&
    key.previousExpiresAt.getTime() > now;
  if (!current && !previous) throw invalidKey();

  if (!key.lastUsedAt || now - key.lastUsedAt.getTime() > LAST_USED_RESOLUTION_MS) {
    // Best effort and off the request's critical path; minute resolution keeps it from writing on every call.
    key.lastUsedAt = new Date(now);
    ports.db.apiKey
      .update({ where: { id: key.id }, data: { lastUsedAt: new Date(now) } })
      .catch((err: unknown) => ports.log.warn({ err, keyId: key.id }, 'could not record last_used_at'));
  }
  return keyCaller(key);
}

function loadKey(ports: AuthPorts, hash: string): Promise<CachedKey | null> {
  return ports.db.apiKey.findFirst({
    where: { OR: [{ secretHash: hash }, { previousSecretHash: hash }] },
    select: {
      id: true,
      projectId: true,
      scopes: true,
      status: true,
      expiresAt: true,
      secretHash: true,
      previousSecretHash: true,
      previousExpiresAt: true,
      lastUsedAt: true,
      budgetMicros: true,
      models: true,
    },
  });
}
