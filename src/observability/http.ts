import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyPluginAsync } from 'fastify';
import { SvcError } from '../errors/svc-error.ts';
import { HOME_LINKS, homeRoutes } from './home.ts';
import { registerOpenApi, registerOpenApiRoutes } from './openapi.ts';

export const METRICS_PATH = '/metrics';

const sha256 = (s: string) => createHash('sha256').update(s).digest();

/**
 * GET /metrics needs `Authorization: Bearer <SVC_METRICS_TOKEN>` or the operator key; both compared as SHA-256 digests
 * in constant time. Anything else is 401 invalid_api_key, as for a bad key anywhere.
 */
function metricsAuthorizer(token: string | null, masterKeyHash: string): (header: string | undefined) => boolean {
  const tokenDigest = token ? sha256(token) : null;
  const masterDigest = Buffer.from(masterKeyHash, 'hex');
  return (header) => {
    const m = /^Bearer (\S+)$/.exec(header ?? '');
    if (!m) return false;
    const presented = sha256(m[1]!);
    const isToken = tokenDigest !== null && timingSafeEqual(presented, tokenDigest);
    const isMaster = masterDigest.length === presented.length && timingSafeEqual(presented, masterDigest);
    return isToken || isMaster;
  };
}

/**
 * The hooks: tracing (first of all hooks, when tracing is on) and the metric hooks (when metrics are on); and the
 * OpenAPI generator, which sees routes as they are added. Registered by buildApp before any other hook and route.
 */
export const observabilityHooks: FastifyPluginAsync = async (app) => {
  const { observability } = app.deps;
  observability.tracing?.register(app);
  observability.metrics?.registerHooks(app);
  await registerOpenApi(app, observability.version);
};
// Not encapsulated: the hooks must see every route, and swagger every route registered after it.
Object.assign(observabilityHooks, { [Symbol.for('skip-override')]: true });

/**
 * GET /metrics, when metrics are on. Also on SVC_ROLE=worker's health server: the worker's figures (webhook attempts,
 * the usage batches it writes) are its own.
 */
export const metricsRoutes: FastifyPluginAsync = async (app) => {
  const { observability, config, masterKeyHash } = app.deps;
  const metrics = observability.metrics;
  if (metrics) {
    const authorized = metricsAuthorizer(config.observability.metricsToken, masterKeyHash);
    app.get(METRICS_PATH, { config: { action: 'public' }, schema: { hide: true } }, async (req, reply) => {
      if (!authorized(req.headers.authorization)) {
        throw new SvcError('invalid_api_key', { message: 'GET /metrics needs SVC_METRICS_TOKEN or the operator key as a Bearer token.' });
      }
      const { contentType, body } = await metrics.render();
      return reply.type(contentType).header('Cache-Control', 'no-store').send(body);
    });
  }
};

/** GET /metrics (when metrics are on), the OpenAPI document and its reference page, and GET /. */
export const observabilityRoutes: FastifyPluginAsync = async (app) => {
  const { observability, config } = app.deps;
  await app.register(metricsRoutes);
  await registerOpenApiRoutes(app);
  await app.register(homeRoutes(observability.version, HOME_LINKS(config.production, observability.metrics !== null)));
};
