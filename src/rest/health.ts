import type { FastifyPluginAsync } from 'fastify';

export const healthRoutes: FastifyPluginAsync = async (app) => {
  app.get('/healthz', async () => ({ status: 'ok' }));

  /** 200 when the database and Redis (if configured) answer, else 503 (CONTRACT §1). */
  app.get('/readyz', async (_req, reply) => {
    const checks: Record<string, 'ok' | 'unavailable' | 'degraded'> = {};
    try {
      await app.deps.db.$queryRaw`SELECT 1`;
      checks.database = 'ok';
    } catch {
      checks.database = 'unavailable';
    }
    if (app.deps.redis) {
      try {
        await app.deps.redis.ping();
        checks.redis = 'ok';
      } catch {
        checks.redis = 'unavailable';
      }
    }
    // degraded: Redis is configured but unreachable, and rate limits run per replica in process (src/limits).
    checks.limits = await app.deps.limiter.health();
    const ready = Object.values(checks).every((v) => v === 'ok');
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ok' : 'unavailable', checks });
  });
};
