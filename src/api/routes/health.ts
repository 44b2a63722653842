import type { FastifyPluginAsync } from 'fastify';
import { publicReason, redisHealthOf } from '../../redis/health.ts';

/** A readiness probe must answer even when a dependency hangs (a frozen Redis keeps its socket open). */
export const READY_CHECK_TIMEOUT_MS = 1_000;

async function check(run: () => Promise<unknown>): Promise<'ok' | 'unavailable'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'unavailable'>((resolve) => {
    timer = setTimeout(() => resolve('unavailable'), READY_CHECK_TIMEOUT_MS);
  });
  try {
    return await Promise.race([run().then(() => 'ok' as const, () => 'unavailable' as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export const healthRoutes: FastifyPluginAsync = async (app) => {
  app.get('/healthz', { config: { action: 'public' } }, async () => ({ status: 'ok' }));

  /**
   * 200 when the database and Redis (if configured) answer, else 503 (CONTRACT §1). Each check gives up after 1 s. On a
   * Redis Cluster "answers" means the cluster says cluster_state:ok and every master answers (redis/health.ts); a
   * cluster or failover error (CLUSTERDOWN, CROSSSLOT, no master, READONLY) is an outage, and `reasons.redis` names it.
   */
  app.get('/readyz', { config: { action: 'public' } }, async (_req, reply) => {
    const deps = app.deps;
    const [database, redis, limits] = await Promise.all([
      check(() => deps.db.$queryRaw`SELECT 1`),
      // A PING (shared with the probe in flight, if any): its answer also ends a Redis outage for every request.
      deps.redis ? check(async () => {
        if (!(await redisHealthOf(deps.redis!).check())) throw new Error('Redis does not answer');
      }) : Promise.resolve(null),
      // degraded: Redis is configured but unreachable, and rate limits run per replica in process (src/limits).
      Promise.race([
        deps.limiter.health(),
        new Promise<'degraded'>((resolve) => setTimeout(() => resolve('degraded'), READY_CHECK_TIMEOUT_MS).unref()),
      ]),
    ]);
    // Redis not answering means the limits cannot be shared, even if the limiter has not had a command fail yet.
    const checks: Record<string, 'ok' | 'unavailable' | 'degraded'> = {
      database,
      ...(redis ? { redis } : {}),
      limits: redis === 'unavailable' ? 'degraded' : limits,
    };
    const ready = Object.values(checks).every((v) => v === 'ok');
    const why = redis === 'unavailable' ? publicReason(redisHealthOf(deps.redis!).reason ?? 'did not answer within 1 s') : null;
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ok' : 'unavailable', checks, ...(why ? { reasons: { redis: why } } : {}) });
  });
};
