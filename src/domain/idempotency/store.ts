import type { Redis } from 'ioredis';
import { isUniqueViolation, type Db } from '../../db/client.ts';

/** CONTRACT §5: records are kept 24 hours. */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;
/** A first request still "running" after this long is taken to have died (crash, restart) and may be run again. */
export const IDEMPOTENCY_LEASE_MS = 5 * 60_000;

export type BeginResult =
  | { kind: 'started' }
  | { kind: 'replay'; status: number; body: string }
  | { kind: 'conflict'; reason: 'different_request' | 'in_progress' };

/** Holds across replicas: PostgreSQL by default, Redis when configured. */
export interface IdempotencyStore {
  begin(scope: string, key: string, requestHash: string, nowMs: number): Promise<BeginResult>;
  complete(scope: string, key: string, status: number, body: string): Promise<void>;
  /** Forget a first request that ended in a retryable failure, so that a retry runs again. */
  abandon(scope: string, key: string): Promise<void>;
}

interface Stored {
  hash: string;
  state: 'running' | 'done';
  startedAt: number;
  status?: number;
  body?: string;
}

function judge(stored: Stored, requestHash: string): BeginResult {
  if (stored.hash !== requestHash) return { kind: 'conflict', reason: 'different_request' };
  if (stored.state === 'running') return { kind: 'conflict', reason: 'in_progress' };
  return { kind: 'replay', status: stored.status!, body: stored.body! };
}

export class PrismaIdempotencyStore implements IdempotencyStore {
  constructor(private readonly db: Db) {}

  async begin(scope: string, key: string, requestHash: string, nowMs: number): Promise<BeginResult> {
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        await this.db.idempotencyRecord.create({
          data: {
            scope,
            key,
            requestHash,
            state: 'running',
            createdAt: new Date(nowMs),
            expiresAt: new Date(nowMs + IDEMPOTENCY_TTL_MS),
          },
        });
        return { kind: 'started' };
      } catch (err) {
        if (!isUniqueViolation(err)) throw err;
      }
      const row = await this.db.idempotencyRecord.findUnique({ where: { scope_key: { scope, key } } });
      if (!row) continue; // deleted in between: try to insert again
      const stale =
        row.expiresAt.getTime() <= nowMs || (row.state === 'running' && row.createdAt.getTime() + IDEMPOTENCY_LEASE_MS <= nowMs);
      if (!stale) {
        return judge(
          { hash: row.requestHash, state: row.state as Stored['state'], startedAt: row.createdAt.getTime(), status: row.responseStatus ?? undefined, body: row.responseBody ?? undefined },
          requestHash,
        );
      }
      // Delete exactly the stale row (another request may have replaced it already) and race for the insert.
      await this.db.idempotencyRecord.deleteMany({ where: { scope, key, createdAt: row.createdAt } });
    }
    return { kind: 'conflict', reason: 'in_progress' };
  }

  async complete(scope: string, key: string, status: number, body: string): Promise<void> {
    await this.db.idempotencyRecord.updateMany({
      where: { scope, key, state: 'running' },
      data: { state: 'done', responseStatus: status, responseBody: body },
    });
  }

  async abandon(scope: string, key: string): Promise<void> {
    await this.db.idempotencyRecord.deleteMany({ where: { scope, key, state: 'running' } });
  }

  /** Drops records past their 24 hours. */
  async purgeExpired(nowMs: number): Promise<number> {
    const { count } = await this.db.idempotencyRecord.deleteMany({ where: { expiresAt: { lte: new Date(nowMs) } } });
    return count;
  }
}

export class RedisIdempotencyStore implements IdempotencyStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  private k(scope: string, key: string): string {
    // Hash tag on the scope keeps one project's records on one Redis Cluster slot.
    return `${this.prefix}idem:{${scope}}:${key}`;
  }

  async begin(scope: string, key: string, requestHash: string, nowMs: number): Promise<BeginResult> {
    const fresh: Stored = { hash: requestHash, state: 'running', startedAt: nowMs };
    const redisKey = this.k(scope, key);
    // SET NX GET: one round trip that either claims the key or returns what is there.
    const previous = await this.redis.set(redisKey, JSON.stringify(fresh), 'PX', IDEMPOTENCY_TTL_MS, 'NX', 'GET');
    if (previous === null) return { kind: 'started' };
    const stored = JSON.parse(previous) as Stored;
    // Redis expires the key on its own clock; the injected clock decides too, so both agree on "24 hours".
    const expired = stored.startedAt + IDEMPOTENCY_TTL_MS <= nowMs;
    const abandoned = stored.state === 'running' && stored.startedAt + IDEMPOTENCY_LEASE_MS <= nowMs;
    if (expired || abandoned) {
      const swapped = await this.redis.eval(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 end return 0",
        1,
        redisKey,
        previous,
        JSON.stringify(fresh),
        IDEMPOTENCY_TTL_MS,
      );
      if (swapped === 1) return { kind: 'started' };
      return { kind: 'conflict', reason: 'in_progress' };
    }
    return judge(stored, requestHash);
  }

  async complete(scope: string, key: string, status: number, body: string): Promise<void> {
    const redisKey = this.k(scope, key);
    const current = await this.redis.get(redisKey);
    if (!current) return;
    const stored = JSON.parse(current) as Stored;
    await this.redis.set(redisKey, JSON.stringify({ ...stored, state: 'done', status, body }), 'KEEPTTL', 'XX');
  }

  async abandon(scope: string, key: string): Promise<void> {
    await this.redis.del(this.k(scope, key));
  }
}

/** What the decorator below needs of src/webhooks/secret-box.ts (kept as an interface: domain/ does not import it). */
export interface Sealer {
  seal(plaintext: string, aad: string): string;
  open(sealed: string, aad: string): string;
}

/**
 * Stored responses can hold secrets (a created key's `svc_sk_…`, a webhook's `whsec_…`), so they are kept encrypted
 * (AES-256-GCM, the key that protects webhook secrets) and bound to their scope and Idempotency-Key.
 */
export class SealedIdempotencyStore implements IdempotencyStore {
  constructor(
    private readonly inner: IdempotencyStore,
    private readonly sealer: Sealer,
  ) {}

  async begin(scope: string, key: string, requestHash: string, nowMs: number): Promise<BeginResult> {
    const result = await this.inner.begin(scope, key, requestHash, nowMs);
    return result.kind === 'replay' ? { ...result, body: this.sealer.open(result.body, `${scope}\n${key}`) } : result;
  }

  complete(scope: string, key: string, status: number, body: string): Promise<void> {
    return this.inner.complete(scope, key, status, this.sealer.seal(body, `${scope}\n${key}`));
  }

  abandon(scope: string, key: string): Promise<void> {
    return this.inner.abandon(scope, key);
  }
}
