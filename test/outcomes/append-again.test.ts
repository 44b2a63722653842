import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, type Redis } from '../../src/redis/connection.ts';
import { redisHealthOf } from '../../src/redis/health.ts';
import type { InferenceOutcome } from '../../src/domain/usage/outcome.ts';
import type { RedisOutcomeWriter } from '../../src/jobs/outcomes/redis-stream.ts';
import { buildTestApp, client, seedProject, type TestApp } from '../helpers/app.ts';
import { redisOutcomeWriter, testOutcome } from '../helpers/outcomes.ts';
import { PrivateRedis, redisServerPath } from '../helpers/private-services.ts';
import { REQUIRE_ENGINES } from '../helpers/redis-engines.ts';
import { uniqueName } from '../helpers/services.ts';

/** The writer's Redis command timeout here: an entry not acknowledged by then is Redis not answering. */
const COMMAND_TIMEOUT_MS = 300;

/**
 * Redis replicates asynchronously: a failover (Sentinel, Cluster) can promote a replica that never got the last
 * entries its master acknowledged (stream-shards.ts AT_RISK_MS). Here the stream loses its entries while Redis stops
 * answering, as after such a failover; once Redis answers again the writer appends the entries of the moments before
 * the outage again, and every accepted outcome is written once.
 */
describe.runIf(redisServerPath() !== null || REQUIRE_ENGINES)('usage entries a failover lost', () => {
  let t: TestApp;
  let server: PrivateRedis;
  let redis: Redis;
  let admin: Redis;
  beforeAll(async () => {
    t = await buildTestApp();
    server = await PrivateRedis.start();
    redis = createRedis({ mode: 'single', url: server.url });
    redisHealthOf(redis, { commandTimeoutMs: COMMAND_TIMEOUT_MS, log: t.deps.log });
    await redis.connect();
    admin = createRedis({ mode: 'single', url: server.url });
    await admin.connect();
  }, 120_000);
  afterAll(async () => {
    server?.unfreeze();
    redis?.disconnect();
    admin?.disconnect();
    await server?.destroy();
    await t?.close();
  });

  /**
   * A failover that lost the stream: it is gone, and meanwhile Redis does not answer. `during` is recorded then: its
   * command times out, Redis is found down (the moments before are set aside), and it is written directly. Returns once
   * Redis answers again (found by the health state's probe, which asking whether it is usable starts).
   */
  async function failover(writer: RedisOutcomeWriter, redis: Redis, during: InferenceOutcome): Promise<void> {
    await admin.del(writer.stream);
    server.freeze();
    try {
      await writer.record(during);
      await expect.poll(() => t.deps.db.usageRecord.count({ where: { requestId: during.requestId } }), { timeout: 10_000 }).toBe(1);
    } finally {
      server.unfreeze();
    }
    await expect.poll(() => redisHealthOf(redis).usable, { timeout: 10_000 }).toBe(true);
  }

  it('are appended again once Redis answers, and each outcome is written once', async () => {
    const { projectId, keyId } = await seedProject(client(t.app));
    const writer = redisOutcomeWriter(t, redis, `${uniqueName('again')}:`);
    // Not consuming yet: the entries stay in the stream, as entries a consumer had not read when the master failed.
    const at = new Date(t.clock.now());
    const before = [testOutcome(projectId, keyId, at, 100n), testOutcome(projectId, keyId, at, 200n), testOutcome(projectId, keyId, at, 300n)];
    for (const o of before) await writer.record(o);
    expect(await admin.xlen(writer.stream)).toBeGreaterThan(0);

    // The failover: the promoted replica never got them, and meanwhile Redis does not answer.
    const during = testOutcome(projectId, keyId, at, 400n);
    await failover(writer, redis, during);

    // The entries set aside go back into the stream, and the consumer writes them.
    await expect.poll(() => t.logs.text, { timeout: 10_000 }).toMatch(/appended the usage entries of the moments before the Redis outage again/);
    const all = [...before, during];
    const written = () => t.deps.db.usageRecord.count({ where: { requestId: { in: all.map((o) => o.requestId) } } });

    // flush() (read-your-writes for GET /v1/usage) waits for the entries appended again, not only for the ids the lost
    // entries had. On PostgreSQL the consumer's write is held once it has read them (the table locked against inserts
    // in another transaction), so a flush that did not wait for them would return while they are unwritten.
    const onPostgres = Boolean(process.env.DATABASE_URL);
    let release = () => {};
    let locked: Promise<unknown> = Promise.resolve();
    if (onPostgres) {
      const held = new Promise<void>((r) => (release = r));
      let taken!: () => void;
      const lockTaken = new Promise<void>((r) => (taken = r));
      locked = t.deps.db.$transaction(
        async (tx) => {
          await tx.$executeRawUnsafe('LOCK TABLE usage_records IN SHARE ROW EXCLUSIVE MODE');
          taken();
          await held;
        },
        { timeout: 30_000 },
      );
      await lockTaken;
    }
    writer.start();
    let writtenAtFlush = -1;
    const flushed = writer.flush({ timeoutMs: 15_000 }).then(async (ok) => {
      writtenAtFlush = await written();
      return ok;
    });
    if (onPostgres) {
      await expect.poll(async () => Number(((await admin.xpending(writer.stream, 'writers')) as unknown[])[0]), { timeout: 10_000 }).toBeGreaterThan(0);
      // A flush that does not wait for them returns within its 20 ms polls.
      await Promise.race([flushed, new Promise((r) => setTimeout(r, 500))]);
      release();
      await locked;
    }
    expect(await flushed).toBe(true);
    expect(writtenAtFlush).toBe(all.length);
    const rows = await t.deps.db.usageRecord.findMany({ where: { requestId: { in: all.map((o) => o.requestId) } }, select: { requestId: true, costMicros: true } });
    expect(rows.map((r) => r.requestId).sort()).toEqual(all.map((o) => o.requestId).sort());
    expect(rows.reduce((sum, r) => sum + r.costMicros, 0n)).toBe(1_000n);
    await writer.close();
  }, 60_000);

  it('are only those a consumer had not written yet: the written ones are let go', async () => {
    const { projectId, keyId } = await seedProject(client(t.app));
    // A connection of its own: the first test's writer, closed, still hears the shared connection's outage and recovery.
    const redis = createRedis({ mode: 'single', url: server.url });
    redisHealthOf(redis, { commandTimeoutMs: COMMAND_TIMEOUT_MS, log: t.deps.log });
    await redis.connect();
    const writer = redisOutcomeWriter(t, redis, `${uniqueName('release')}:`);
    const at = new Date(t.clock.now());
    const written = [testOutcome(projectId, keyId, at, 1n), testOutcome(projectId, keyId, at, 2n), testOutcome(projectId, keyId, at, 4n)];
    writer.start();
    for (const o of written) await writer.record(o);
    expect(await writer.flush({ timeoutMs: 10_000 })).toBe(true);
    // Each was its own entry (its own turn); the consumer wrote them: their at-risk copies are let go.
    expect(await writer.releaseWritten({ olderThanMs: 0 })).toBe(written.length);

    // The consumer stops reading: these are in the stream and nowhere else, so they stay at risk.
    writer.pause();
    const unread = [testOutcome(projectId, keyId, at, 8n), testOutcome(projectId, keyId, at, 16n)];
    for (const o of unread) await writer.record(o);
    expect(await writer.flush({ timeoutMs: 200 })).toBe(false);
    expect(await writer.releaseWritten({ olderThanMs: 0 })).toBe(0);

    // The failover loses the stream while Redis does not answer.
    const logsFrom = t.logs.text.length;
    const during = testOutcome(projectId, keyId, at, 32n);
    await failover(writer, redis, during);
    // Appended again: the two unread ones (and the one Redis did not answer, written directly already), not the three written.
    const again = async () => /"outcomes":(\d+)[^\n]*appended the usage entries of the moments before the Redis outage again/.exec(t.logs.text.slice(logsFrom))?.[1];
    await expect.poll(again, { timeout: 10_000 }).toBeDefined();
    expect(Number(await again())).toBeLessThanOrEqual(unread.length + 1);
    expect(Number(await again())).toBeGreaterThanOrEqual(unread.length);

    writer.resume();
    expect(await writer.flush({ timeoutMs: 15_000 })).toBe(true);
    const all = [...written, ...unread, during];
    const rows = await t.deps.db.usageRecord.findMany({ where: { requestId: { in: all.map((o) => o.requestId) } }, select: { requestId: true, costMicros: true } });
    expect(rows.map((r) => r.requestId).sort()).toEqual(all.map((o) => o.requestId).sort());
    expect(rows.reduce((sum, r) => sum + r.costMicros, 0n)).toBe(63n);
    await writer.close();
    redis.disconnect();
  }, 60_000);

  it('are kept when the stream is gone before Redis is found down: a failover may have lost it', async () => {
    const { projectId, keyId } = await seedProject(client(t.app));
    const writer = redisOutcomeWriter(t, redis, `${uniqueName('gone')}:`);
    writer.start();
    const o = testOutcome(projectId, keyId, new Date(t.clock.now()), 1n);
    await writer.record(o);
    expect(await writer.flush({ timeoutMs: 10_000 })).toBe(true);
    await admin.del(writer.stream);
    expect(await writer.releaseWritten({ olderThanMs: 0 })).toBe(0);
    await writer.close();
  }, 30_000);
});
