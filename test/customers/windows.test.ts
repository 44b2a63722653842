import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { SCALE, type ApplyRequest, type LimitStore } from '../../src/limits/store.ts';
import { MemoryLimitStore } from '../../src/limits/limiter.ts';
import { RedisLimitStore } from '../../src/redis/limit-store.ts';
import { REDIS_URL, deleteRedisPrefix, uniqueName } from '../helpers/services.ts';

/**
 * An end customer's own windows (BucketSpec.own, CONTRACT §22) beside a key's and its project's in ONE store call: the
 * Redis script and the in-process store give the same numbers, all or nothing across windows of different sizes, and a
 * new version starts the customer's windows afresh.
 */
const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
const project = { requestsPerMinute: 100, tokensPerMinute: 10_000, burst: 0, version: 0 };
const call = (nowMs: number, requests: number, tokens: number, own = { r: 2, t: 50, version: 1 }, mode: 'take' | 'force' = 'take'): ApplyRequest => ({
  scope: 'prj_windows',
  limits: project,
  mode,
  nowMs,
  buckets: [
    { id: 'k:key_1:r', resource: 'requests', cost: requests },
    { id: 'p:r', resource: 'requests', cost: requests },
    { id: 'c:cus_1:r', resource: 'requests', cost: requests, own: { perMinute: own.r, version: own.version } },
    { id: 'k:key_1:t', resource: 'tokens', cost: tokens },
    { id: 'p:t', resource: 'tokens', cost: tokens },
    { id: 'c:cus_1:t', resource: 'tokens', cost: tokens, own: { perMinute: own.t, version: own.version } },
  ],
});

async function scenario(store: LimitStore) {
  const out: unknown[] = [];
  const run = async (req: ApplyRequest) => {
    const r = await store.apply(req);
    out.push([r.allowed, r.buckets.map((b) => [b.used / SCALE, b.applied])]);
  };
  await run(call(T0, 1, 20));
  await run(call(T0, 1, 20));
  await run(call(T0, 1, 20));
  await run(call(T0 + 30_000, 1, 40));
  await run(call(T0 + 30_000, 0, -30, undefined, 'force'));
  await run(call(T0 + 30_000, 1, 5, { r: 5, t: 500, version: 2 }));
  return out;
}

describe('an end customer\'s windows in the limiter\'s one call', () => {
  it('the in-process store', async () => {
    const got = await scenario(new MemoryLimitStore());
    const each = (used: number[], applied: number[]) => used.map((u, i) => [u, applied[i]]);
    expect(got).toEqual([
      [true, each([1, 1, 1, 20, 20, 20], [1, 1, 1, 20, 20, 20])],
      [true, each([2, 2, 2, 40, 40, 40], [1, 1, 1, 20, 20, 20])],
      // The customer's requests window (2) refuses: the used units before the call, nothing taken anywhere.
      [false, each([2, 2, 2, 40, 40, 40], [1, 1, 1, 20, 20, 20])],
      // 30 s later the key's and the project's windows are empty again (100 and 10,000 a minute); the customer's drained
      // 1 request (2 a minute) and 25 tokens (50 a minute): 15 + 40 tokens do not fit its 50.
      [false, each([0, 0, 1, 0, 0, 15], [1, 1, 1, 40, 40, 40])],
      // A settlement (force) gives tokens back to every token window, none below 0.
      [true, each([0, 0, 1, 0, 0, 0], [0, 0, 0, -30, -30, -30])],
      // New customer limits (version 2): its windows start afresh.
      [true, each([1, 1, 1, 5, 5, 5], [1, 1, 1, 5, 5, 5])],
    ]);
  });

  it.skipIf(!REDIS_URL)('the Redis script gives the same numbers', async () => {
    const redis = new Redis(REDIS_URL!, { maxRetriesPerRequest: 1 });
    const prefix = `${uniqueName('cw')}:`;
    await redis.ping(); // connected: the shared health state lets the batch send
    try {
      expect(await scenario(new RedisLimitStore(redis, prefix))).toEqual(await scenario(new MemoryLimitStore()));
    } finally {
      await deleteRedisPrefix(REDIS_URL!, prefix);
      redis.disconnect();
    }
  });
});
