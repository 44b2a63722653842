import type { Redis } from './connection.ts';
import type { CachedAnswer, CacheLookup, ResponseCache } from '../domain/inference/cache.ts';
import { redisBatchOf, type RedisBatch } from './batch.ts';

/**
 * In Redis, shared by every replica. A Redis that is down or slow must not hold the request up: while the shared Redis
 * health state says it does not answer (health.ts) nothing is sent, and an operation that fails reads as
 * `unavailable`; either way the request goes on uncached. Gets and sets are operations of the shared batch
 * (batch.ts): they travel in the script call of the limiter's and the counters' operations, bounded by
 * the client's commandTimeout. Entries expire on Redis's own clock.
 */
export class RedisResponseCache implements ResponseCache {
  private readonly batch: RedisBatch;

  constructor(
    redis: Redis,
    private readonly prefix: string,
  ) {
    this.batch = redisBatchOf(redis);
  }

  private k(projectId: string, key: string): string {
    return `${this.prefix}cache:{${projectId}}:${key}`;
  }

  async get(projectId: string, key: string): Promise<CacheLookup> {
    if (!this.batch.usable) return { status: 'unavailable' };
    let raw: string | null;
    try {
      raw = await this.batch.run<string | null>('G', [this.k(projectId, key)]);
    } catch {
      return { status: 'unavailable' };
    }
    if (raw === null) return { status: 'miss' };
    try {
      return { status: 'hit', answer: JSON.parse(raw) as CachedAnswer };
    } catch {
      return { status: 'miss' };
    }
  }

  async set(projectId: string, key: string, answer: CachedAnswer, ttlS: number): Promise<boolean> {
    if (!this.batch.usable) return false;
    // Posted (batch.ts): stored, as far as the response says, once the SET is in the kernel's socket buffer; a SET
    // refused after that only means a later miss.
    const posted = this.batch.post('S', [this.k(projectId, key)], [JSON.stringify(answer), ttlS]);
    if ((await posted.durable) === 'written') return true;
    return posted.answer.then(
      () => true,
      () => false,
    );
  }
}
