import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeBatch } from '../../src/redis/batch-script.ts';
import { redisBatchOf } from '../../src/redis/batch.ts';
import { REDIS_URL, uniqueName } from '../helpers/services.ts';

describe('a script call', () => {
  it('names each key once, in order of first use, and each operation its keys by index', () => {
    const ops = [
      { op: 'S' as const, keys: ['a'], args: ['1', 60] },
      { op: 'M' as const, keys: ['b', 'a'], args: [] },
      { op: 'G' as const, keys: ['a'], args: [] },
    ];
    expect(encodeBatch(ops)).toEqual({ keys: ['a', 'b'], argv: ['S2,1', '1', 60, 'M0,2,1', 'G0,1'] });
  });
});

// The hot path's batched script call (src/redis/batch.ts), against a real Redis.
describe.runIf(REDIS_URL)('operations gathered in one turn', () => {
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(REDIS_URL!);
  });
  afterAll(() => redis.disconnect());

  it('leave as one operation made once from all the items, in the same script call as the others, and every caller gets its answer', async () => {
    const batch = redisBatchOf(redis);
    const stream = uniqueName('gathered');
    const counter = uniqueName('counter');
    await redis.set(counter, 'seven');
    const group = {};
    let made = 0;
    const fields = (items: number[]) => {
      made++;
      return ['f', items.join(',')];
    };
    const calls = batch.counts.calls;
    const [a, b, c, got] = await Promise.all([
      batch.gather(group, 'X', [stream], 1, fields),
      batch.gather(group, 'X', [stream], 2, fields),
      batch.gather(group, 'X', [stream], 3, fields),
      batch.run<string>('G', [counter]),
    ]);
    expect(made).toBe(1);
    expect(batch.counts.calls).toBe(calls + 1);
    expect(got).toBe('seven');
    expect(typeof a).toBe('string');
    expect([b, c]).toEqual([a, a]);
    expect(await redis.xrange(stream, '-', '+')).toEqual([[a, ['f', '1,2,3']]]);
    // The next turn starts a new operation.
    const d = await batch.gather(group, 'X', [stream], 4, fields);
    expect(d).not.toBe(a);
    expect(made).toBe(2);
    await redis.del(stream, counter);
  });

  it('run operations that share keys in one call, each on its own keys in its own order', async () => {
    const batch = redisBatchOf(redis);
    const [a, b] = [uniqueName('shared'), uniqueName('missing')];
    const calls = batch.counts.calls;
    const got = await Promise.all([
      batch.run('S', [a], ['1', 60]),
      batch.run('G', [a]),
      batch.run('M', [b, a]),
      batch.run('A', [a, b], ['5']),
      batch.run('M', [a, b]),
    ]);
    expect(batch.counts.calls).toBe(calls + 1);
    expect(got).toEqual(['OK', '1', [null, '1'], 0, ['6', null]]);
    expect(await redis.exists(b)).toBe(0);
    await redis.del(a);
  });

  it('reject every caller of the group when its arguments cannot be made, and no other operation', async () => {
    const batch = redisBatchOf(redis);
    const counter = uniqueName('counter');
    await redis.set(counter, 'eight');
    const broken = () => {
      throw new Error('cannot seal');
    };
    const group = {};
    const [a, b, got] = await Promise.allSettled([
      batch.gather(group, 'X', [uniqueName('never')], 1, broken),
      batch.gather(group, 'X', [uniqueName('never')], 2, broken),
      batch.run<string>('G', [counter]),
    ]);
    expect(a).toMatchObject({ status: 'rejected', reason: { message: 'cannot seal' } });
    expect(b).toMatchObject({ status: 'rejected', reason: { message: 'cannot seal' } });
    expect(got).toEqual({ status: 'fulfilled', value: 'eight' });
    await redis.del(counter);
  });
});
