import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { ConfigError } from '../../src/config/environment.ts';
import { shardOfProject, usageStreamKeys } from '../../src/jobs/outcomes/stream-shards.ts';
import { keySlot } from '../../src/redis/slot.ts';

/** CONTRACT §18: the Redis modes, exactly one of them, each refused with one line naming the variable. */
describe('Redis configuration', () => {
  it('reads one server, a Cluster or Sentinel', () => {
    expect(loadConfig({ REDIS_URL: 'redis://cache:6379/2' }).redis).toEqual({ mode: 'single', url: 'redis://cache:6379/2' });
    expect(loadConfig({ REDIS_CLUSTER_NODES: 'r1:7000, r2:7001,[::1]:7002' }).redis).toEqual({
      mode: 'cluster',
      nodes: [
        { host: 'r1', port: 7000 },
        { host: 'r2', port: 7001 },
        { host: '::1', port: 7002 },
      ],
    });
    expect(loadConfig({ REDIS_SENTINELS: 's1:26379,s2:26379', REDIS_SENTINEL_NAME: 'main' }).redis).toEqual({
      mode: 'sentinel',
      sentinels: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26379 },
      ],
      name: 'main',
    });
    expect(loadConfig({}).redis).toBeNull();
  });

  it('shards the usage stream once on one server, six times on a Cluster, as set otherwise', () => {
    expect(loadConfig({ REDIS_URL: 'redis://x:6379' }).usageStreamShards).toBe(1);
    expect(loadConfig({ REDIS_CLUSTER_NODES: 'r1:7000' }).usageStreamShards).toBe(6);
    expect(loadConfig({ REDIS_CLUSTER_NODES: 'r1:7000', SVC_USAGE_STREAM_SHARDS: '12' }).usageStreamShards).toBe(12);
  });

  it('lets SVC_ROLE api and worker run on any Redis mode', () => {
    const db = { DATABASE_URL: 'postgresql://db/x' };
    expect(loadConfig({ ...db, SVC_ROLE: 'api', REDIS_CLUSTER_NODES: 'r1:7000' }).role).toBe('api');
    expect(loadConfig({ ...db, SVC_ROLE: 'worker', REDIS_SENTINELS: 's1:26379', REDIS_SENTINEL_NAME: 'm' }).role).toBe('worker');
  });

  it.each([
    [{ REDIS_URL: 'redis://x:6379', REDIS_CLUSTER_NODES: 'r1:7000' }, 'REDIS_CLUSTER_NODES'],
    [{ REDIS_CLUSTER_NODES: 'r1:7000', REDIS_SENTINELS: 's1:26379', REDIS_SENTINEL_NAME: 'm' }, 'REDIS_SENTINELS'],
    [{ REDIS_CLUSTER_NODES: 'r1' }, 'REDIS_CLUSTER_NODES'],
    [{ REDIS_CLUSTER_NODES: 'r1:7000,,' }, 'REDIS_CLUSTER_NODES'],
    [{ REDIS_CLUSTER_NODES: 'r1:70000' }, 'REDIS_CLUSTER_NODES'],
    [{ REDIS_CLUSTER_NODES: 'redis://r1:7000' }, 'REDIS_CLUSTER_NODES'],
    [{ REDIS_SENTINELS: 's1:26379' }, 'REDIS_SENTINEL_NAME'],
    [{ REDIS_SENTINEL_NAME: 'm' }, 'REDIS_SENTINEL_NAME'],
    [{ REDIS_SENTINELS: 's1:0', REDIS_SENTINEL_NAME: 'm' }, 'REDIS_SENTINELS'],
    [{ SVC_USAGE_STREAM_SHARDS: '0' }, 'SVC_USAGE_STREAM_SHARDS'],
    [{ SVC_USAGE_STREAM_SHARDS: 'many' }, 'SVC_USAGE_STREAM_SHARDS'],
    [{ SVC_ROLE: 'api', DATABASE_URL: 'postgresql://db/x' }, 'SVC_ROLE'],
  ])('refuses %j naming %s', (env, variable) => {
    let err: unknown;
    try {
      loadConfig(env);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).variable).toBe(variable);
  });
});

describe('usage stream shards', () => {
  it('keeps the one stream its name, and spreads several over the slots, each with its dead twin on its tag', () => {
    expect(usageStreamKeys('svc:', 1)).toEqual(['svc:usage:outcomes']);
    const keys = usageStreamKeys('svc:', 6);
    expect(new Set(keys).size).toBe(6);
    keys.forEach((k, i) => {
      const slot = keySlot(k);
      expect(slot).toBeGreaterThanOrEqual(Math.floor((i * 16384) / 6));
      expect(slot).toBeLessThan(Math.floor(((i + 1) * 16384) / 6));
      expect(keySlot(`${k}:dead`)).toBe(slot);
      expect(keySlot(`${k}:lease`)).toBe(slot);
    });
  });

  it('puts a project on one shard, and projects on every shard', () => {
    const seen = new Set<number>();
    for (let i = 0; i < 200; i++) seen.add(shardOfProject(`prj_${i}`, 6));
    expect(seen.size).toBe(6);
    expect(shardOfProject('prj_x', 6)).toBe(shardOfProject('prj_x', 6));
    expect(shardOfProject('prj_x', 1)).toBe(0);
  });

  it('computes the slots Redis Cluster computes (CLUSTER KEYSLOT)', () => {
    expect(keySlot('foo')).toBe(12182);
    expect(keySlot('123456789')).toBe(12739);
    expect(keySlot('{user1000}.following')).toBe(keySlot('user1000'));
    expect(keySlot('a{}b')).not.toBe(keySlot('a{}c'));
  });
});
