import { EventEmitter } from 'node:events';
import { ReplyError, type Redis } from 'ioredis';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { FallbackLimitStore } from '../../src/redis/fallback-limit-store.ts';
import { PROBE_INTERVAL_MS } from '../../src/redis/health.ts';
import type { RedisLimitStore } from '../../src/redis/limit-store.ts';
import type { ApplyRequest, ApplyResult } from '../../src/limits/store.ts';
import { LogCapture } from '../helpers/app.ts';

const REQ: ApplyRequest = {
  scope: 'prj_x',
  limits: { requestsPerMinute: 2, tokensPerMinute: 100, burst: 0, version: 0 },
  mode: 'take',
  nowMs: 1_000,
  buckets: [{ id: 'p:r', resource: 'requests', cost: 1 }],
};

/** A Redis whose connection state the test sets, and a primary store whose answers it scripts. */
function rig() {
  const redis = Object.assign(new EventEmitter(), { status: 'ready', ping: async () => 'PONG' });
  let next: () => Promise<ApplyResult> = async () => ({ allowed: true, limits: REQ.limits, buckets: [{ used: 42, applied: 1 }] });
  let calls = 0;
  const primary = {
    apply: async () => {
      calls++;
      return next();
    },
    publish: async () => {},
  };
  const logs = new LogCapture();
  let clock = 0;
  const store = new FallbackLimitStore(primary as unknown as RedisLimitStore, redis as unknown as Redis, pino(logs), () => clock);
  return {
    store,
    redis,
    logs,
    calls: () => calls,
    answer: (fn: () => Promise<ApplyResult>) => (next = fn),
    advance: (ms: number) => (clock += ms),
  };
}

describe('FallbackLimitStore', () => {
  it('uses Redis while it answers', async () => {
    const r = rig();
    expect((await r.store.apply(REQ)).buckets[0]!.used).toBe(42);
    expect(await r.store.health()).toBe('ok');
  });

  it('falls back on a connection error, logs once, leaves Redis alone until a PING answers, then returns to it', async () => {
    const r = rig();
    r.answer(async () => {
      throw new Error('Connection is closed.');
    });
    r.redis.ping = async () => {
      throw new Error('Connection is closed.');
    };
    const first = await r.store.apply(REQ);
    expect(first.allowed).toBe(true);
    expect(first.buckets[0]!.used).toBe(60_000); // the in-process window: one request of 2
    expect((await r.store.apply(REQ)).allowed).toBe(true);
    expect((await r.store.apply(REQ)).allowed).toBe(false);
    expect(r.calls()).toBe(1);
    expect(await r.store.health()).toBe('degraded');

    r.answer(async () => ({ allowed: true, limits: REQ.limits, buckets: [{ used: 7, applied: 1 }] }));
    let pings = 0;
    r.redis.ping = async () => {
      pings++;
      return 'PONG';
    };
    // No probe is due yet: still the in-process windows, and nothing sent to Redis.
    r.advance(PROBE_INTERVAL_MS - 1);
    await r.store.apply(REQ);
    expect([r.calls(), pings]).toEqual([1, 0]);
    // Due: this request starts a PING without waiting for it (still in process); /readyz shares that PING.
    r.advance(1);
    expect((await r.store.apply(REQ)).buckets[0]!.used).not.toBe(7);
    expect(await r.store.health()).toBe('ok');
    expect(pings).toBe(1);
    expect((await r.store.apply(REQ)).buckets[0]!.used).toBe(7);
    expect(r.logs.lines.filter((l) => l.includes('fall back'))).toHaveLength(1);
    expect(r.logs.lines.filter((l) => l.includes('rate limits are shared across replicas again'))).toHaveLength(1);
  });

  it('does not queue behind a reconnecting client: no call to Redis until it is ready', async () => {
    const r = rig();
    r.redis.status = 'reconnecting';
    expect((await r.store.apply(REQ)).allowed).toBe(true);
    expect(r.calls()).toBe(0);
    expect(await r.store.health()).toBe('degraded');
    r.redis.status = 'ready';
    expect(await r.store.health()).toBe('ok');
    expect((await r.store.apply(REQ)).buckets[0]!.used).toBe(42);
  });

  it('lets an error of the script itself through instead of hiding it behind the fallback', async () => {
    const r = rig();
    r.answer(async () => {
      throw new ReplyError('ERR user_script:12: attempt to compare nil with number script: abc, on @user_script:12.');
    });
    await expect(r.store.apply(REQ)).rejects.toThrow(/user_script/);
    expect(await r.store.health()).toBe('ok');
  });
});
