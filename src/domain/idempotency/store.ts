import { isUniqueViolation, type Db } from '../../db/client.ts';
import { SvcError } from '../../errors/svc-error.ts';

/** CONTRACT §5: records are kept 24 hours. */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;
/** A first request still "running" after this long is taken to have died (crash, restart) and may be run again. */
export const IDEMPOTENCY_LEASE_MS = 5 * 60_000;

export type BeginResult =
  | { kind: 'started' }
  | { kind: 'replay'; status: number; body: string }
  | { kind: 'conflict'; reason: 'different_request' | 'in_progress' };

/** Holds across replicas: PostgreSQL by default, Redis when configured (RedisIdempotencyStore: redis/idempotency-store.ts). */
export interface IdempotencyStore {
  begin(scope: string, key: string, requestHash: string, nowMs: number): Promise<BeginResult>;
  complete(scope: string, key: string, status: number, body: string): Promise<void>;
  /** Forget a first request that ended in a retryable failure, so that a retry runs again. */
  abandon(scope: string, key: string): Promise<void>;
}

/** A record as both stores keep it. */
export interface Stored {
  hash: string;
  state: 'running' | 'done';
  startedAt: number;
  status?: number;
  body?: string;
}

/** What a begin finds when the key is already taken by a live record. */
export function judge(stored: Stored, requestHash: string): BeginResult {
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

/** What a request with an Idempotency-Key gets while the store cannot be asked: nothing ran, so a retry is safe. */
export function idempotencyStoreUnavailable(cause?: unknown): SvcError {
  return new SvcError('internal_error', {
    param: 'Idempotency-Key',
    message: 'The Idempotency-Key store is not answering, so the request was not run. Retry it with the same Idempotency-Key.',
    cause,
  });
}

/** What the decorator below needs of src/kernel/secret-box.ts (kept as an interface: the composition root passes the real one). */
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
