import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createRedis, type Redis as AnyRedis } from '../../src/redis/connection.ts';
import { redisBatchOf, type Durable } from '../../src/redis/batch.ts';
import { keySlot } from '../../src/redis/slot.ts';
import { HAVE_REDIS_ENGINES, REQUIRE_ENGINES, RedisClusterEngine } from '../helpers/redis-engines.ts';
import { PrivateRedis, redisServerPath } from '../helpers/private-services.ts';
import { uniqueName } from '../helpers/services.ts';

/**
 * Posted operations of the hot path's batch (src/redis/batch.ts post(), gatherPosted()): the settlement, spend and
 * usage entry after a provider call. The caller goes on once the script call is in the kernel's socket buffer, not
 * once Redis answers; when that cannot be seen as the call is made, it waits for the answer as before. Each case
 * freezes the Redis server the call goes to (SIGSTOP: it reads and answers nothing), so an operation that is
 * `written` while it is frozen can only have been handed to the kernel, and its answer comes once it runs again.
 */

/** Which of `durable` and `answer` settles first, within `ms`. */
async function first<T>(posted: { durable: Promise<Durable>; answer: Promise<T> }, ms: number): Promise<Durable | 'answer' | 'nothing'> {
  return Promise.race([
    posted.durable,
    posted.answer.then(
      () => 'answer' as const,
      () => 'answer' as const,
    ),
    new Promise<'nothing'>((r) => setTimeout(() => r('nothing'), ms)),
  ]);
}

const HAVE_REDIS_SERVER = redisServerPath() !== null;

describe.runIf(HAVE_REDIS_SERVER || REQUIRE_ENGINES)('posted operations on one Redis server', () => {
  let server: PrivateRedis;
  let redis: AnyRedis;
  beforeAll(async () => {
    server = await PrivateRedis.start();
    redis = createRedis({ mode: 'single', url: server.url });
    await redis.connect();
  });
  afterAll(async () => {
    server?.unfreeze();
    redis?.disconnect();
    await server?.destroy();
  });

  it('are durable once written to the socket, while Redis answers nothing, and get their answers when it runs again', async () => {
    const batch = redisBatchOf(redis);
    const stream = `{${uniqueName('posted')}}:stream`;
    const counter = `{${uniqueName('posted')}}:counter`;
    await redis.set(counter, '5');
    const written = batch.counts.written;
    server.freeze();
    let entry: { durable: Promise<Durable>; answer: Promise<unknown> };
    let add: { durable: Promise<Durable>; answer: Promise<unknown> };
    try {
      entry = batch.gatherPosted({}, 'X', [stream], 'one', (items) => ['f', items.join(',')]);
      add = batch.post('A', [counter], ['7']);
      expect(await first(entry, 2_000)).toBe('written');
      expect(await first(add, 2_000)).toBe('written');
      expect(batch.counts.written).toBe(written + 1);
      // Nothing answered while frozen.
      expect(await first({ durable: new Promise<Durable>(() => {}), answer: entry.answer }, 200)).toBe('nothing');
    } finally {
      server.unfreeze();
    }
    const id = await entry.answer;
    expect(typeof id).toBe('string');
    await add.answer;
    expect(await redis.xrange(stream, '-', '+')).toEqual([[id, ['f', 'one']]]);
    expect(await redis.get(counter)).toBe('12');
    await redis.del(stream, counter);
  });

  it('wait for the answer when the socket cannot take the call at once (its kernel buffer full)', async () => {
    const batch = redisBatchOf(redis);
    const key = `{${uniqueName('big')}}:v`;
    const written = batch.counts.written;
    server.freeze();
    let posted: { durable: Promise<Durable>; answer: Promise<unknown> };
    try {
      // 64 MB to a Redis that reads nothing: the kernel takes a few MB, the rest waits in the socket's own buffer.
      posted = batch.post('S', [key], ['x'.repeat(64 * 1024 * 1024), 60]);
      expect(await first(posted, 1_000)).toBe('nothing');
      expect(batch.counts.written).toBe(written);
    } finally {
      server.unfreeze();
    }
    expect(await posted.durable).toBe('answered');
    await expect(posted.answer).resolves.toBe('OK');
    await redis.del(key);
  });

  it('are refused at once, as answered, while the client is not connected (callers take their path without Redis)', async () => {
    const lazy = createRedis({ mode: 'single', url: server.url });
    try {
      const posted = redisBatchOf(lazy).post('S', [`{${uniqueName('lazy')}}:v`], ['x', 60]);
      expect(await posted.durable).toBe('answered');
      await expect(posted.answer).rejects.toThrow(/does not answer/);
    } finally {
      lazy.disconnect();
    }
  });

  it('reject with their own error when Redis refuses them, after being durable, and leave no unhandled rejection', async () => {
    const batch = redisBatchOf(redis);
    const wrong = `{${uniqueName('wrongtype')}}:k`;
    await redis.set(wrong, 'not a stream');
    const posted = batch.post('X', [wrong], ['f', 'v']);
    expect(await posted.durable).toBe('written');
    await expect(posted.answer).rejects.toThrow(/WRONGTYPE/);
    await redis.del(wrong);
  });
});

describe.runIf(HAVE_REDIS_ENGINES || REQUIRE_ENGINES)('posted operations on a Redis Cluster', () => {
  let cluster: RedisClusterEngine;
  let redis: AnyRedis;
  beforeAll(async () => {
    // A long node timeout: a master frozen for a second must not be failed over.
    cluster = await RedisClusterEngine.start({ nodeTimeoutMs: 30_000 });
    redis = createRedis({ mode: 'cluster', nodes: cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })) });
    await redis.connect();
  }, 120_000);
  afterAll(async () => {
    for (const n of cluster?.nodes ?? []) n.child?.kill('SIGCONT');
    redis?.disconnect();
    await cluster?.stop();
  });

  it('are written straight to the socket of the master of their slot', async () => {
    const tag = uniqueName('slot');
    const stream = `{${tag}}:stream`;
    const slot = keySlot(stream);
    const master = (await cluster.masters()).find((m) => m.slots.some(([from, to]) => slot >= from && slot <= to))!;
    const node = cluster.nodes.find((n) => n.port === master.port)!;
    const batch = redisBatchOf(redis);
    // Connected, with the slot table: the master of the slot answers a first call.
    await batch.run('G', [`{${tag}}:warm`]);
    const written = batch.counts.written;
    node.child!.kill('SIGSTOP');
    let posted: { durable: Promise<Durable>; answer: Promise<unknown> };
    try {
      posted = batch.gatherPosted({}, 'X', [stream], 'one', (items) => ['f', items.join(',')]);
      expect(await first(posted, 2_000)).toBe('written');
      expect(batch.counts.written).toBe(written + 1);
    } finally {
      node.child!.kill('SIGCONT');
    }
    const id = await posted.answer;
    const direct = new Redis(master.port, '127.0.0.1');
    try {
      expect(await direct.xrange(stream, '-', '+')).toEqual([[id, ['f', 'one']]]);
      await direct.del(stream);
    } finally {
      direct.disconnect();
    }

  }, 60_000);
});
