import { EventEmitter } from 'node:events';
import { ReplyError } from 'ioredis';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { ApplyRequest, ApplyResult } from '../../src/limits/store.ts';
import { MemoryLimitStore } from '../../src/limits/limiter.ts';
import type { Redis } from '../../src/redis/connection.ts';
import { FallbackLimitStore } from '../../src/redis/fallback-limit-store.ts';
import { isRedisOutage, publicReason, RedisHealth } from '../../src/redis/health.ts';
import type { RedisLimitStore } from '../../src/redis/limit-store.ts';
import { LogCapture } from '../helpers/app.ts';

/**
 * CONTRACT §18: a cluster or Sentinel error is an outage of Redis (never a per-replica fallback while Redis answers, never
 * a 500), and an outage or failover does not hand out a fresh window.
 */
describe('cluster and failover errors', () => {
  it.each([
    ['CLUSTERDOWN The cluster is down', true],
    ["CROSSSLOT Keys in request don't hash to the same slot", true],
    ["READONLY You can't write against a read only replica.", true],
    ['MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to no', true],
    ['TRYAGAIN Multiple keys request during rehashing of slot', true],
    ['LOADING Redis is loading the dataset in memory', true],
    ['ERR No master found for this name', true],
    ['WRONGTYPE Operation against a key holding the wrong kind of value', false],
    ['ERR user_script:1: Script attempted to access nonexistent global variable', false],
  ])('reads the reply %j as an outage: %s', (message, outage) => {
    expect(isRedisOutage(new ReplyError(message))).toBe(outage);
  });

  it('reads no answer at all (a dropped connection, a cluster without nodes) as an outage', () => {
    expect(isRedisOutage(new Error('Connection is closed.'))).toBe(true);
    expect(isRedisOutage(new Error('Failed to refresh slots cache.'))).toBe(true);
  });

  it('goes down on CLUSTERDOWN, names it, logs once however many follow, and comes back on a PING', async () => {
    const redis = Object.assign(new EventEmitter(), { status: 'ready', ping: async () => 'PONG' });
    const logs = new LogCapture();
    let clock = 0;
    const health = new RedisHealth(redis, { log: pino(logs), monotonicNow: () => clock });
    for (let i = 0; i < 50; i++) health.report(new ReplyError('CLUSTERDOWN The cluster is down'));
    expect(health.usable).toBe(false);
    expect(health.reason).toBe('CLUSTERDOWN The cluster is down');
    expect(logs.lines.filter((l) => /Redis does not answer/.test(l))).toHaveLength(1);
    clock += 1_000;
    expect(await health.check()).toBe(true);
    expect(health.usable).toBe(true);
    expect(health.reason).toBeNull();
    expect(logs.lines.filter((l) => /Redis answers again/.test(l))).toHaveLength(1);
  });

  it.each([
    ['CLUSTERDOWN The cluster is down', 'CLUSTERDOWN The cluster is down'],
    ['CLUSTERDOWN cluster_state:fail', 'CLUSTERDOWN cluster_state:fail'],
    ['MOVED 3999 10.0.0.7:6381', 'MOVED 3999 …'],
    ['connect ECONNREFUSED 10.0.0.7:6379', 'the connection to Redis is lost'],
    ['Redis did not answer within 500 ms (command timed out)', 'Redis did not answer in time'],
    ['ERR No master found for this name', 'no master: Sentinel or the cluster names no master'],
    ['All sentinels are unreachable. Retrying from scratch after 10ms.', 'the connection to Redis is lost'],
  ])('shows %j on /readyz as %j (no address, no library message)', (reason, shown) => {
    expect(publicReason(reason)).toBe(shown);
  });

  const REQ: ApplyRequest = {
    scope: 'prj_x',
    limits: { requestsPerMinute: 3, tokensPerMinute: 100, burst: 0, version: 0 },
    mode: 'take',
    nowMs: 1_000,
    buckets: [{ id: 'p:r', resource: 'requests', cost: 1 }],
  };

  function rig() {
    const redis = Object.assign(new EventEmitter(), { status: 'ready', ping: async () => 'PONG' });
    /** The shared windows, standing in for Redis (the same arithmetic: limits/store.ts). */
    const shared = new MemoryLimitStore();
    let fail: Error | null = null;
    const applied: ApplyRequest[] = [];
    const primary = {
      apply: async (req: ApplyRequest): Promise<ApplyResult> => {
        if (fail) throw fail;
        applied.push(req);
        return shared.applySync(req);
      },
      publish: async () => {},
    };
    const logs = new LogCapture();
    const store = new FallbackLimitStore(primary as unknown as RedisLimitStore, redis as unknown as Redis, pino(logs));
    return { store, logs, applied, failWith: (e: Error | null) => (fail = e) };
  }

  it('does not fall back to per-replica windows on an error Redis answered about the command', async () => {
    const r = rig();
    r.failWith(new ReplyError('WRONGTYPE Operation against a key holding the wrong kind of value'));
    await expect(r.store.apply(REQ)).rejects.toThrow(/WRONGTYPE/);
    expect(r.store.isDegraded).toBe(false);
  });

  it('falls back on CLUSTERDOWN from where the shared windows were, and owes Redis what it admitted', async () => {
    const r = rig();
    // Two of three taken through Redis.
    expect((await r.store.apply(REQ)).allowed).toBe(true);
    expect((await r.store.apply(REQ)).allowed).toBe(true);
    r.failWith(new ReplyError('CLUSTERDOWN The cluster is down'));
    // The outage: one left, not a fresh window of three.
    expect((await r.store.apply(REQ)).allowed).toBe(true);
    expect(r.store.isDegraded).toBe(true);
    expect((await r.store.apply(REQ)).allowed).toBe(false);
    expect(r.logs.lines.filter((l) => /unreachable/.test(l))).toHaveLength(1);
    // Back: what the fallback admitted is applied to Redis, which is then full.
    r.failWith(null);
    await r.store.settleOwed();
    expect(r.applied.at(-1)).toMatchObject({ scope: 'prj_x', mode: 'force', buckets: [{ id: 'p:r', cost: 1 }] });
    expect((await r.store.apply(REQ)).allowed).toBe(false);
  });
});
