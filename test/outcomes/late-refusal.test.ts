import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, type Redis } from '../../src/redis/connection.ts';
import { redisHealthOf } from '../../src/redis/health.ts';
import { buildTestApp, client, seedProject, type TestApp } from '../helpers/app.ts';
import { redisOutcomeWriter, testOutcome } from '../helpers/outcomes.ts';
import { PrivateRedis, redisServerPath } from '../helpers/private-services.ts';
import { REQUIRE_ENGINES } from '../helpers/redis-engines.ts';
import { uniqueName } from '../helpers/services.ts';

/** The writer's Redis command timeout here: an entry not acknowledged by then is Redis not answering. */
const COMMAND_TIMEOUT_MS = 300;

/**
 * The usage entry is accepted (and the response sent) once its XADD is in the socket; Redis's refusal or silence comes
 * after. Here Redis is frozen (SIGSTOP) as the entry is written: record() returns at once, then the command timeout
 * finds Redis down and the outcome is written directly to PostgreSQL, in the background, with nothing lost and no
 * unhandled rejection (vitest fails a run that has one).
 */
describe.runIf(redisServerPath() !== null || REQUIRE_ENGINES)('a usage entry refused after the response', () => {
  let t: TestApp;
  let server: PrivateRedis;
  let redis: Redis;
  beforeAll(async () => {
    t = await buildTestApp();
    server = await PrivateRedis.start();
    redis = createRedis({ mode: 'single', url: server.url });
    redisHealthOf(redis, { commandTimeoutMs: COMMAND_TIMEOUT_MS, log: t.deps.log });
    await redis.connect();
  }, 120_000);
  afterAll(async () => {
    server?.unfreeze();
    redis?.disconnect();
    await server?.destroy();
    await t?.close();
  });

  it('is written directly to PostgreSQL once Redis is found not to answer, and flush() waits for it', async () => {
    const { projectId, keyId } = await seedProject(client(t.app));
    const writer = redisOutcomeWriter(t, redis, `${uniqueName('late')}:`);
    const o = testOutcome(projectId, keyId, new Date(t.clock.now()), 1_500n);
    server.freeze();
    try {
      const started = performance.now();
      await writer.record(o);
      // Accepted without an answer from Redis (nor its command timeout).
      expect(performance.now() - started).toBeLessThan(COMMAND_TIMEOUT_MS);
      expect(await t.deps.db.usageRecord.count({ where: { requestId: o.requestId } })).toBe(0);
      // flush() waits for the entry's fate: the timeout, then the direct write.
      expect(await writer.flush({ timeoutMs: 10_000 })).toBe(true);
    } finally {
      server.unfreeze();
    }
    expect(await t.deps.db.usageRecord.findUnique({ where: { requestId: o.requestId } })).toMatchObject({ costMicros: 1_500n, status: o.status });
    expect(writer.stats()).toMatchObject({ accepted: 1, direct: 1, lost: 0 });
    expect(t.logs.text).toMatch(/writing usage records directly to PostgreSQL/);
    await writer.close();
  }, 60_000);
});
