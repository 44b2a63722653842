import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCALE, type ApplyRequest, type BucketSpec, type LimitStore, type VersionedLimits } from '../../src/limits/store.ts';
import { MemoryLimitStore } from '../../src/limits/limiter.ts';
import { RedisLimitStore } from '../../src/redis/limit-store.ts';
import { BATCH_LUA } from '../../src/redis/batch-script.ts';
import { REDIS_URL, deleteRedisPrefix, uniqueName } from '../helpers/services.ts';

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
const limits = (rpm: number, tpm: number, burst: number, version = 0): VersionedLimits => ({
  requestsPerMinute: rpm,
  tokensPerMinute: tpm,
  burst,
  version,
});
const KEY_WINDOWS = (keyId: string, requests: number, tokens: number): BucketSpec[] => [
  { id: `k:${keyId}:r`, resource: 'requests', cost: requests },
  { id: 'p:r', resource: 'requests', cost: requests },
  { id: `k:${keyId}:t`, resource: 'tokens', cost: tokens },
  { id: 'p:t', resource: 'tokens', cost: tokens },
];

interface StoreCase {
  name: string;
  skip: boolean;
  make(): Promise<{ store: LimitStore; close(): Promise<void>; redis?: Redis; prefix?: string }>;
}

const cases: StoreCase[] = [
  { name: 'in-process store', skip: false, make: async () => ({ store: new MemoryLimitStore(), close: async () => {} }) },
  {
    name: 'Redis store',
    skip: !REDIS_URL,
    make: async () => {
      const redis = new Redis(REDIS_URL!, { maxRetriesPerRequest: 1 });
      await redis.ping(); // REDIS_URL set but unreachable: fail, never skip
      const prefix = `${uniqueName('lim')}:`;
      return {
        store: new RedisLimitStore(redis, prefix),
        redis,
        prefix,
        close: async () => {
          await deleteRedisPrefix(REDIS_URL!, prefix);
          redis.disconnect();
        },
      };
    },
  },
];

describe.each(cases)('$name', (c) => {
  let store: LimitStore;
  let env: Awaited<ReturnType<StoreCase['make']>>;
  beforeAll(async () => {
    if (c.skip) return;
    env = await c.make();
    store = env.store;
  });
  afterAll(async () => {
    if (!c.skip) await env.close();
  });

  let n = 0;
  const scope = () => `prj_store_${++n}_${Math.random().toString(36).slice(2, 8)}`;
  const take = (s: string, l: VersionedLimits, nowMs: number, requests = 1, tokens = 0, keyId = 'key_a') =>
    store.apply({ scope: s, limits: l, mode: 'take', nowMs, buckets: KEY_WINDOWS(keyId, requests, tokens) });

  it.skipIf(c.skip)('lets requests_per_minute + burst pass from rest, then refuses', async () => {
    const s = scope();
    const l = limits(50, 100_000, 10);
    const results = [];
    for (let i = 0; i < 61; i++) results.push(await take(s, l, T0));
    expect(results.filter((r) => r.allowed)).toHaveLength(60);
    expect(results.at(-1)!.allowed).toBe(false);
    // The refusal reports the window as it is: full, nothing taken.
    expect(results.at(-1)!.buckets[0]!.used).toBe(60 * SCALE);
    expect(results[0]!.buckets.map((b) => b.used)).toEqual([SCALE, SCALE, 0, 0]);
  });

  it.skipIf(c.skip)('refills at requests_per_minute: one request every 60/rpm seconds, exactly on time', async () => {
    const s = scope();
    const l = limits(50, 100_000, 0);
    for (let i = 0; i < 50; i++) expect((await take(s, l, T0)).allowed).toBe(true);
    expect((await take(s, l, T0 + 1199)).allowed).toBe(false);
    expect((await take(s, l, T0 + 1200)).allowed).toBe(true);
    expect((await take(s, l, T0 + 1200)).allowed).toBe(false);
    expect((await take(s, l, T0 + 2400)).allowed).toBe(true);
  });

  it.skipIf(c.skip)('never lets the sustained rate exceed requests_per_minute', async () => {
    const s = scope();
    const l = limits(30, 100_000, 5);
    let passed = 0;
    // Ten minutes of a client asking every 100 ms.
    for (let t = 0; t <= 600_000; t += 100) if ((await take(s, l, T0 + t)).allowed) passed++;
    expect(passed).toBe(35 + 30 * 10);
  });

  it.skipIf(c.skip)('takes from every window or from none', async () => {
    const s = scope();
    const l = limits(3, 100_000, 0);
    for (let i = 0; i < 3; i++) expect((await take(s, l, T0, 1, 0, 'key_a')).allowed).toBe(true);
    // The project window is empty: key_b is refused and its own window stays untouched.
    const refused = await take(s, l, T0, 1, 0, 'key_b');
    expect(refused.allowed).toBe(false);
    expect(refused.buckets[0]!.used).toBe(0);
    expect(refused.buckets[1]!.used).toBe(3 * SCALE);
  });

  it.skipIf(c.skip)('takes tokens, cuts a take larger than the window to its size, and settles with refunds or debt', async () => {
    const s = scope();
    const l = limits(60, 1000, 50);
    const big = await take(s, l, T0, 0, 5000);
    expect(big.allowed).toBe(true);
    // burst does not raise the token window (spec 8.1.4): 1000, not 1050.
    expect(big.buckets.map((b) => b.applied)).toEqual([0, 0, 1000, 1000]);
    expect((await take(s, l, T0, 0, 1)).allowed).toBe(false);

    const refund = await store.apply({ scope: s, limits: l, mode: 'force', nowMs: T0, buckets: KEY_WINDOWS('key_a', 0, -400) });
    expect(refund.buckets[2]!.used).toBe(600 * SCALE);
    const debt = await store.apply({ scope: s, limits: l, mode: 'force', nowMs: T0, buckets: KEY_WINDOWS('key_a', 0, 900) });
    expect(debt.allowed).toBe(true);
    expect(debt.buckets[3]!.used).toBe(1500 * SCALE);
    // In debt by 500 tokens at 1000/min: a 1-token take passes after 30.06 s.
    expect((await take(s, l, T0 + 30_059, 0, 1)).allowed).toBe(false);
    expect((await take(s, l, T0 + 30_060, 0, 1)).allowed).toBe(true);
  });

  it.skipIf(c.skip)('looks without taking when the cost is 0', async () => {
    const s = scope();
    const l = limits(2, 100, 0);
    await take(s, l, T0, 1, 40);
    const look = await take(s, l, T0, 0, 0);
    expect(look.allowed).toBe(true);
    expect(look.buckets.map((b) => b.used)).toEqual([SCALE, SCALE, 40 * SCALE, 40 * SCALE]);
  });

  it.skipIf(c.skip)('starts the windows afresh under a new limits version, and the newest published version wins', async () => {
    const s = scope();
    const old = limits(2, 100, 0, 0);
    await take(s, old, T0);
    await take(s, old, T0);
    expect((await take(s, old, T0)).allowed).toBe(false);

    const v1 = limits(5, 100, 0, T0);
    await store.publish(s, v1);
    // A caller still holding the old limits gets the published ones, with fresh windows.
    const r = await take(s, old, T0);
    expect(r.allowed).toBe(true);
    expect(r.limits).toEqual(v1);
    expect(r.buckets[1]!.used).toBe(SCALE);

    // An older publish (a slower replica) does not go back.
    await store.publish(s, limits(1, 1, 0, T0 - 1));
    expect((await take(s, old, T0)).limits).toEqual(v1);

    // A caller that read newer limits than the store holds is believed (a lost publish heals itself).
    const v2 = limits(7, 100, 0, T0 + 5);
    expect((await take(s, v2, T0)).limits).toEqual(v2);
    expect((await take(s, old, T0)).limits).toEqual(v2);
  });

  it.skipIf(c.skip)('lets exactly capacity of 200 concurrent takes pass', async () => {
    const s = scope();
    const l = limits(50, 100_000, 10);
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => take(s, l, T0, 1, 0, `key_${i % 7}`)));
    expect(results.filter((r) => r.allowed)).toHaveLength(60);
  });

  it.skipIf(c.skip)('keeps a replica whose clock is behind from refilling or moving time backwards', async () => {
    const s = scope();
    const l = limits(60, 100, 0);
    for (let i = 0; i < 60; i++) await take(s, l, T0 + 10_000);
    expect((await take(s, l, T0)).allowed).toBe(false);
    expect((await take(s, l, T0 + 10_999)).allowed).toBe(false);
    expect((await take(s, l, T0 + 11_000)).allowed).toBe(true);
  });
});

describe.skipIf(!REDIS_URL)('Redis specifics', () => {
  let redis: Redis;
  let prefix: string;
  let store: RedisLimitStore;
  const sent: string[] = [];
  beforeAll(async () => {
    redis = new Redis(REDIS_URL!, { maxRetriesPerRequest: 1 });
    await redis.ping();
    prefix = `${uniqueName('lim')}:`;
    store = new RedisLimitStore(redis, prefix);
    const original = redis.sendCommand.bind(redis);
    redis.sendCommand = ((cmd: { name: string }, ...rest: unknown[]) => {
      sent.push(cmd.name);
      return (original as (...a: unknown[]) => unknown)(cmd, ...rest);
    }) as typeof redis.sendCommand;
  });
  afterAll(async () => {
    await deleteRedisPrefix(REDIS_URL!, prefix);
    redis.disconnect();
  });

  it('uses one EVALSHA per call for all four windows: the script is loaded once and called by its SHA', async () => {
    const req: ApplyRequest = { scope: 'prj_sha', limits: limits(10, 1000, 0), mode: 'take', nowMs: T0, buckets: KEY_WINDOWS('key_a', 1, 5) };
    await store.apply(req);
    sent.length = 0;
    for (let i = 0; i < 5; i++) await store.apply(req);
    expect(sent).toEqual(Array(5).fill('evalsha'));
    const sha = createHash('sha1').update(BATCH_LUA).digest('hex');
    expect(await redis.script('EXISTS', sha)).toEqual([1]);
  });

  it('puts every key of a project in one hash slot (Redis Cluster)', async () => {
    await store.apply({ scope: 'prj_slot', limits: limits(10, 1000, 0, 1), mode: 'take', nowMs: T0, buckets: KEY_WINDOWS('key_z', 1, 5) });
    const keys = await redis.keys(`${prefix}rl:*prj_slot*`);
    expect(keys.sort()).toEqual(
      ['cfg', 'k:key_z:r', 'k:key_z:t', 'p:r', 'p:t'].map((s) => `${prefix}rl:{prj_slot}:${s}`).sort(),
    );
    // The hash tag is the first {…}: the same for all, so one slot.
    expect(new Set(keys.map((k) => /\{([^}]*)\}/.exec(k)![1]))).toEqual(new Set(['prj_slot']));
  });

  it('expires a window once it has refilled', async () => {
    await store.apply({ scope: 'prj_ttl', limits: limits(60, 1000, 0), mode: 'take', nowMs: T0, buckets: KEY_WINDOWS('key_t', 1, 0) });
    const ttl = await redis.pttl(`${prefix}rl:{prj_ttl}:p:r`);
    // One request at 60/min refills in 1 s; plus a minute of slack for clock skew.
    expect(ttl).toBeGreaterThan(60_000);
    expect(ttl).toBeLessThanOrEqual(61_000);
  });
});
