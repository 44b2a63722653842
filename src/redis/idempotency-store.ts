import type { Logger } from 'pino';
import type { Redis } from './connection.ts';
import {
  IDEMPOTENCY_LEASE_MS,
  IDEMPOTENCY_TTL_MS,
  idempotencyStoreUnavailable,
  judge,
  type BeginResult,
  type IdempotencyStore,
  type Stored,
} from '../domain/idempotency/store.ts';
import { isRedisOutage, redisHealthOf, type RedisHealth } from './health.ts';

/** A write Redis did not take while it did not answer, applied once it answers again (health.ts). */
type Owed =
  | { kind: 'complete'; status: number; body: string }
  | { kind: 'abandon' }
  /** A claim (SET NX) that timed out may still land: it is removed if it did, so that a retry is not refused for the lease. */
  | { kind: 'release'; claim: string };

const MAX_OWED = 10_000;
const RELEASE_LUA = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
const SWAP_LUA = "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 end return 0";
/** The running record becomes the stored response, in one round trip (its hash and start are kept; TTL too). */
const COMPLETE_LUA = `
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local s = cjson.decode(v)
if s.state ~= 'running' then return 0 end
s.state = 'done'
s.status = tonumber(ARGV[1])
s.body = ARGV[2]
redis.call('SET', KEYS[1], cjson.encode(s), 'KEEPTTL')
return 1
`;

type IdempotencyCommands = { svcIdemComplete(key: string, status: number, body: string): Promise<number> };

/**
 * In Redis (shared by every replica). While Redis does not answer (the shared health state: a frozen or unreachable
 * Redis), a request with an Idempotency-Key cannot be checked against its earlier runs, so it is refused at once with
 * a retryable 500 internal_error naming Idempotency-Key, never run (running it could run it twice) and never held.
 * The result of a request that did run is kept in memory and stored once Redis answers again.
 */
export class RedisIdempotencyStore implements IdempotencyStore {
  private readonly redisHealth: RedisHealth;
  private readonly owed = new Map<string, Owed>();

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly log?: Logger,
  ) {
    this.redisHealth = redisHealthOf(redis, { log });
    this.redisHealth.onRecovered(() => void this.settleOwed());
    if (typeof (redis as unknown as Partial<IdempotencyCommands>).svcIdemComplete !== 'function') {
      redis.defineCommand('svcIdemComplete', { lua: COMPLETE_LUA, numberOfKeys: 1 });
    }
  }

  private k(scope: string, key: string): string {
    // Hash tag on the scope keeps one project's records on one Redis Cluster slot.
    return `${this.prefix}idem:{${scope}}:${key}`;
  }

  async begin(scope: string, key: string, requestHash: string, nowMs: number): Promise<BeginResult> {
    if (!this.redisHealth.usable) throw idempotencyStoreUnavailable();
    const claim = JSON.stringify({ hash: requestHash, state: 'running', startedAt: nowMs } satisfies Stored);
    const redisKey = this.k(scope, key);
    // SET NX GET: one round trip that either claims the key or returns what is there.
    const previous = await this.claim(redisKey, claim, () => this.redis.set(redisKey, claim, 'PX', IDEMPOTENCY_TTL_MS, 'NX', 'GET'));
    if (previous === null) return { kind: 'started' };
    const stored = JSON.parse(previous) as Stored;
    // Redis expires the key on its own clock; the injected clock decides too, so both agree on "24 hours".
    const expired = stored.startedAt + IDEMPOTENCY_TTL_MS <= nowMs;
    const abandoned = stored.state === 'running' && stored.startedAt + IDEMPOTENCY_LEASE_MS <= nowMs;
    if (expired || abandoned) {
      const swapped = await this.claim(redisKey, claim, () => this.redis.eval(SWAP_LUA, 1, redisKey, previous, claim, IDEMPOTENCY_TTL_MS));
      if (swapped === 1) return { kind: 'started' };
      return { kind: 'conflict', reason: 'in_progress' };
    }
    return judge(stored, requestHash);
  }

  /** Runs a command that may write `claim`; if Redis does not answer, the claim is released once it does. */
  private async claim<T>(redisKey: string, claim: string, command: () => Promise<T>): Promise<T> {
    try {
      return await this.redisHealth.watch(command());
    } catch (err) {
      if (!isRedisOutage(err)) throw err;
      this.owe(redisKey, { kind: 'release', claim });
      throw idempotencyStoreUnavailable(err);
    }
  }

  async complete(scope: string, key: string, status: number, body: string): Promise<void> {
    await this.write(this.k(scope, key), { kind: 'complete', status, body });
  }

  async abandon(scope: string, key: string): Promise<void> {
    await this.write(this.k(scope, key), { kind: 'abandon' });
  }

  /** Never throws for an unreachable Redis (the response is on its way): the write is owed instead. */
  private async write(redisKey: string, op: Owed): Promise<void> {
    if (!this.redisHealth.usable) return this.owe(redisKey, op);
    try {
      await this.apply(redisKey, op);
    } catch (err) {
      if (!isRedisOutage(err)) throw err;
      this.owe(redisKey, op);
    }
  }

  private async apply(redisKey: string, op: Owed): Promise<void> {
    const watch = <T>(p: Promise<T>) => this.redisHealth.watch(p);
    if (op.kind === 'abandon') {
      await watch(this.redis.del(redisKey));
    } else if (op.kind === 'release') {
      await watch(this.redis.eval(RELEASE_LUA, 1, redisKey, op.claim));
    } else {
      await watch((this.redis as unknown as IdempotencyCommands).svcIdemComplete(redisKey, op.status, op.body));
    }
  }

  private owe(redisKey: string, op: Owed): void {
    if (!this.owed.has(redisKey) && this.owed.size >= MAX_OWED) {
      this.log?.error({ key: redisKey }, 'Idempotency-Key writes owed to Redis are over their bound: this one is dropped');
      return;
    }
    // A later write of the same key replaces an earlier one (a release is followed by nothing: begin failed).
    this.owed.set(redisKey, op);
  }

  /** Applies the writes Redis missed; those it misses again stay owed. */
  async settleOwed(): Promise<void> {
    const owed = [...this.owed];
    this.owed.clear();
    await Promise.all(
      owed.map(async ([redisKey, op]) => {
        if (this.owed.has(redisKey)) return; // a newer write of the key came in meanwhile
        try {
          await this.apply(redisKey, op);
        } catch (err) {
          if (!isRedisOutage(err)) this.log?.error({ err, key: redisKey }, 'an owed Idempotency-Key write failed');
          else if (!this.owed.has(redisKey)) this.owe(redisKey, op);
        }
      }),
    );
  }

  /** How many writes wait for Redis (tests, diagnostics). */
  get owedWrites(): number {
    return this.owed.size;
  }
}
