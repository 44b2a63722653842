import { EventEmitter } from 'node:events';
import { ReplyError, type Redis } from 'ioredis';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { PROBE_INTERVAL_MS, RedisHealth, RedisUnavailableError, redisHealthOf } from '../../src/redis/health.ts';
import { LogCapture } from '../helpers/app.ts';

/** A client whose connection state and PING answers the test sets; commands are promises the test settles. */
function rig() {
  const pings: { resolve: (v: string) => void; reject: (e: Error) => void }[] = [];
  const redis = Object.assign(new EventEmitter(), {
    status: 'ready',
    ping: () => new Promise<string>((resolve, reject) => pings.push({ resolve, reject })),
  });
  const logs = new LogCapture();
  let clock = 0;
  const health = new RedisHealth(redis as unknown as Redis, { log: pino(logs), monotonicNow: () => clock, probeTimeoutMs: 60_000 });
  return { redis, health, logs, pings, advance: (ms: number) => (clock += ms) };
}

function command<T>() {
  let settle!: { resolve: (v: T) => void; reject: (e: Error) => void };
  const promise = new Promise<T>((resolve, reject) => (settle = { resolve, reject }));
  return { promise, ...settle };
}

const TIMEOUT = () => new Error('Command timed out');

describe('RedisHealth', () => {
  it('is usable while the connection is ready and nothing failed', () => {
    const r = rig();
    expect(r.health.usable).toBe(true);
    r.redis.status = 'reconnecting';
    expect(r.health.usable).toBe(false);
    expect(r.pings).toHaveLength(0);
  });

  it('is taken down by a command that got no answer, not by an error Redis answered with', async () => {
    const r = rig();
    const wrongType = command<string>();
    const watched = r.health.watch(wrongType.promise);
    wrongType.reject(new ReplyError('WRONGTYPE Operation against a key holding the wrong kind of value'));
    await expect(watched).rejects.toThrow(/WRONGTYPE/);
    expect(r.health.usable).toBe(true);

    const frozen = command<string>();
    const timedOut = r.health.watch(frozen.promise);
    frozen.reject(TIMEOUT());
    await expect(timedOut).rejects.toThrow('Command timed out');
    expect(r.health.usable).toBe(false);
    const logged = r.logs.lines.filter((l) => l.includes('Redis does not answer'));
    expect(logged).toHaveLength(1);
    expect(JSON.parse(logged[0]!)).toMatchObject({ level: 50, err: 'Command timed out' });
  });

  it('lets every command still waiting go the moment one fails, instead of each waiting for its own timeout', async () => {
    const r = rig();
    const waiting = [command<string>(), command<string>()];
    const watched = waiting.map((c) => r.health.watch(c.promise));
    const failing = command<string>();
    void r.health.watch(failing.promise).catch(() => {});
    failing.reject(TIMEOUT());
    for (const w of watched) await expect(w).rejects.toBeInstanceOf(RedisUnavailableError);
    // One sent while already down is let go at once too; its late answer changes nothing.
    const late = command<string>();
    const lateWatched = r.health.watch(late.promise);
    late.resolve('OK');
    await expect(lateWatched).rejects.toBeInstanceOf(RedisUnavailableError);
  });

  it('while down, PINGs at most once per interval without making anyone wait, and is back when one answers', async () => {
    const r = rig();
    let recovered = 0;
    r.health.onRecovered(() => recovered++);
    r.health.report(TIMEOUT());
    expect(r.health.usable).toBe(false);
    r.advance(PROBE_INTERVAL_MS - 1);
    expect(r.health.usable).toBe(false);
    expect(r.pings).toHaveLength(0);
    r.advance(1);
    expect(r.health.usable).toBe(false); // starts a PING, does not wait for it
    expect(r.health.usable).toBe(false);
    expect(r.pings).toHaveLength(1);

    // The PING fails (/readyz, asking meanwhile, shares it): still down, and the next one is due an interval after it.
    const asked = r.health.check();
    r.pings[0]!.reject(TIMEOUT());
    expect(await asked).toBe(false);
    expect(r.pings).toHaveLength(1);
    r.advance(PROBE_INTERVAL_MS - 1);
    expect(r.health.usable).toBe(false);
    expect(r.pings).toHaveLength(1);
    r.advance(1);
    expect(r.health.usable).toBe(false);
    expect(r.pings).toHaveLength(2);

    // /readyz shares the PING in flight; its answer brings Redis back for everyone.
    const ready = r.health.check();
    expect(r.pings).toHaveLength(2);
    r.pings[1]!.resolve('PONG');
    expect(await ready).toBe(true);
    expect(r.health.usable).toBe(true);
    expect(recovered).toBe(1);
    expect(r.logs.lines.filter((l) => l.includes('Redis answers again'))).toHaveLength(1);
  });

  it('is down when the connection drops, letting waiting commands go, and back when ioredis reconnects', async () => {
    const r = rig();
    let recovered = 0;
    r.health.onRecovered(() => recovered++);
    const waiting = r.health.watch(command<string>().promise);
    r.redis.status = 'reconnecting';
    r.redis.emit('reconnecting');
    await expect(waiting).rejects.toBeInstanceOf(RedisUnavailableError);
    expect(r.health.usable).toBe(false);
    r.redis.status = 'ready';
    r.redis.emit('ready');
    expect(r.health.usable).toBe(true);
    expect(recovered).toBe(1);
  });

  it('check() answers false at once for a connection that is not ready, and PINGs a healthy one', async () => {
    const r = rig();
    r.redis.status = 'connecting';
    expect(await r.health.check()).toBe(false);
    expect(r.pings).toHaveLength(0);
    r.redis.status = 'ready';
    const ok = r.health.check();
    r.pings[0]!.resolve('PONG');
    expect(await ok).toBe(true);
    const failing = r.health.check();
    r.pings[1]!.reject(TIMEOUT());
    expect(await failing).toBe(false);
    expect(r.health.usable).toBe(false);
  });

  it('is one state per client, shared by everything that uses it', () => {
    const a = rig().redis as unknown as Redis;
    const b = rig().redis as unknown as Redis;
    expect(redisHealthOf(a)).toBe(redisHealthOf(a));
    expect(redisHealthOf(a)).not.toBe(redisHealthOf(b));
    redisHealthOf(a).report(TIMEOUT());
    expect(redisHealthOf(a).usable).toBe(false);
    expect(redisHealthOf(b).usable).toBe(true);
  });
});
