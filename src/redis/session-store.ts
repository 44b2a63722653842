import type { Redis } from './connection.ts';
import type { SessionRecord, SessionStore } from '../domain/operators/session-store.ts';

/**
 * One string key per session (JSON) that Redis drops at the absolute timeout, and one set per operator naming its
 * sessions' digests, so that deprovisioning finds them all. The idle timeout is checked on read, on the gateway's clock.
 *
 * Redis Cluster: no command and no MULTI spans two keys (a session is found by its digest alone, so its key cannot
 * carry the operator's tag): the operator's set is written (SADD + PEXPIRE, one MULTI on its one key) before the
 * session, so that deprovisioning never misses a session that exists, and sessions are deleted one key per command.
 */
export class RedisSessionStore implements SessionStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly now: () => number,
  ) {}

  private key = (tokenHash: string) => `${this.prefix}session:${tokenHash}`;
  private operatorKey = (operatorId: string) => `${this.prefix}operator-sessions:${operatorId}`;

  async create(s: SessionRecord): Promise<void> {
    const ttlMs = Math.max(1, s.expiresAt - this.now());
    const done = await this.redis
      .multi()
      .sadd(this.operatorKey(s.operatorId), s.tokenHash)
      // Every session lasts as long at most, so the newest one's timeout covers the older ones.
      .pexpire(this.operatorKey(s.operatorId), ttlMs)
      .exec();
    const failed = done?.find(([err]) => err);
    if (!done || failed) throw failed?.[0] ?? new Error('the sign-in was not stored (MULTI discarded)');
    await this.redis.set(this.key(s.tokenHash), JSON.stringify(s), 'PX', ttlMs);
  }

  async find(tokenHash: string): Promise<SessionRecord | null> {
    const raw = await this.redis.get(this.key(tokenHash));
    return raw ? (JSON.parse(raw) as SessionRecord) : null;
  }

  async touch(tokenHash: string, lastSeenAt: number): Promise<void> {
    const found = await this.find(tokenHash);
    if (!found) return;
    // KEEPTTL: the absolute timeout stays where sign-in put it.
    await this.redis.set(this.key(tokenHash), JSON.stringify({ ...found, lastSeenAt }), 'KEEPTTL', 'XX');
  }

  async remove(tokenHash: string): Promise<boolean> {
    const found = await this.find(tokenHash);
    const removed = await this.redis.del(this.key(tokenHash));
    if (found) await this.redis.srem(this.operatorKey(found.operatorId), tokenHash);
    return removed > 0;
  }

  async removeForOperator(operatorId: string): Promise<SessionRecord[]> {
    const hashes = await this.redis.smembers(this.operatorKey(operatorId));
    const ended: SessionRecord[] = [];
    for (const hash of hashes) {
      const found = await this.find(hash);
      if (found) ended.push(found);
    }
    await Promise.all(hashes.map((h) => this.redis.del(this.key(h))));
    await this.redis.del(this.operatorKey(operatorId));
    return ended;
  }
}
