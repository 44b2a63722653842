import type { Duplex } from 'node:stream';
import Ajv from 'ajv';
import SerializerSelector from '@fastify/fast-json-stringify-compiler';
import { registerResponseCheck } from './response-check.ts';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Bindings, ChildLoggerOptions, LevelWithSilentOrString } from 'pino';
import type { Ctx } from '../domain/context.ts';
import type { DomainPorts } from '../domain/ports.ts';
import type { Deps } from '../deps.ts';
import { PrismaIdempotencyStore, SealedIdempotencyStore } from '../domain/idempotency/store.ts';
import { RedisIdempotencyStore } from '../redis/idempotency-store.ts';
import { newId } from '../db/ids.ts';
import { adminRoutes } from './routes/admin.ts';
import { auditRoutes } from './routes/audit.ts';
import { docsRoutes } from './routes/docs.ts';
import { healthRoutes } from './routes/health.ts';
import { keysRoutes } from './routes/keys.ts';
import { inferenceRoutes } from './routes/inference.ts';
import { responsesRoutes } from './routes/responses.ts';
import { geminiRoutes } from './routes/gemini.ts';
import { openaiRoutes } from './routes/openai.ts';
import { anthropicRoutes } from './routes/anthropic.ts';
import { routingRoutes } from './routes/routing.ts';
import { usageRoutes } from './routes/usage.ts';
import { requestsRoutes } from './routes/requests.ts';
import { webhooksRoutes } from './routes/webhooks.ts';
import { mcpRoutes } from './routes/mcp.ts';
import { projectsRoutes } from './routes/projects.ts';
import { ragRoutes } from './routes/rag.ts';
import { graphqlRoutes } from '../graphql/yoga.ts';
import { registerErrorHandling, registerNotFoundHandler, sendFrameworkError, writeClientError } from './error-handler.ts';
import { rateLimitRequest, registerAuth, registerProjectNames, registerRateLimitHeaders } from './hooks/auth.ts';
import { idempotencyHooks } from './hooks/idempotency.ts';
import { budgetsRoutes } from './routes/budgets.ts';
import { customersRoutes } from './routes/customers.ts';
import { rateLimitsRoutes } from './routes/rate-limits.ts';
import { parseJsonBodies, registerStrictInput, routeValidatorCompiler } from './input.ts';
import { approvalsRoutes } from './routes/approvals.ts';
import { evalsRoutes } from './routes/evals.ts';
import { batchesRoutes } from './routes/batches.ts';
import { filesRoutes } from './routes/files.ts';
import { opsRoutes } from './routes/ops.ts';
import { devRoutes } from './routes/dev.ts';
import { riskRoutes } from './routes/risk.ts';
import { legalRoutes } from './routes/legal.ts';
import { governanceRoutes } from './routes/governance.ts';
import { privacyRoutes } from './routes/privacy.ts';
import { ssoRoutes } from './routes/sso.ts';
import { scimRoutes } from './routes/scim.ts';
import { operatorsRoutes } from './routes/operators.ts';
import { templatesRoutes } from './routes/templates.ts';
import { metricsRoutes, observabilityHooks, observabilityRoutes } from '../observability/http.ts';

declare module 'fastify' {
  interface FastifyInstance {
    deps: Deps;
    /** Each capability's ports (src/domain/ports.ts): what the routes hand the services. */
    ports: DomainPorts;
  }
  interface FastifyRequest {
    /** Set by the auth hook on every authenticated request. */
    ctx: Ctx;
  }
}

// Bodies are JSON and must have the right types ("5" is not a number); query strings are text and are coerced.
const bodyAjv = new Ajv.default({ coerceTypes: false, removeAdditional: false, useDefaults: true, allErrors: false, strict: false });
const queryAjv = new Ajv.default({ coerceTypes: 'array', removeAdditional: false, useDefaults: true, allErrors: false, strict: false });

/**
 * fastify's response serializers (fast-json-stringify, code generated per schema), each compiled on its route's first
 * answer of that status instead of when the app starts: an api process declares 160-odd operations' serializers and
 * most processes answer a few of them (docs/OPERATIONS.md#memory). Same compiler, same output. `eager` (the test
 * suite's SVC_CHECK_RESPONSES) compiles each as it is declared, so a schema fast-json-stringify cannot compile fails
 * the app's start there rather than a first answer.
 */
export function lazySerializers(eager = false): ReturnType<typeof SerializerSelector> {
  const selector = SerializerSelector();
  return (externalSchemas, options) => {
    const compile = selector(externalSchemas, options);
    return (route) => {
      let write = eager ? compile(route) : undefined;
      return (data: unknown) => (write ??= compile(route))(data);
    };
  };
}

/**
 * SVC_ROLE=worker: the background work's process answers /healthz and /readyz (for an orchestrator's probes) and
 * nothing else; the API is served by the api processes.
 */
export async function buildHealthApp(deps: Deps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.log as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: () => newId('req'),
    return503OnClosing: true,
    frameworkErrors: sendFrameworkError,
  });
  app.decorate('deps', deps);
  app.addHook('onRequest', async (req, reply) => {
    reply.header('X-Svc-Request-Id', req.id);
  });
  registerErrorHandling(app);
  registerNotFoundHandler(app);
  await app.register(healthRoutes);
  await app.register(metricsRoutes);
  return app;
}

/** The fastify factory for main.ts and for tests (app.inject). */
export async function buildApp(deps: Deps): Promise<FastifyInstance> {
  // doc_url's base where no request can be read (there is no Host header to go by).
  const listenBase = deps.config.publicUrl ?? `http://${deps.config.host}:${deps.config.port}`;
  const app = Fastify({
    loggerInstance: deps.log as FastifyBaseLogger,
    // Requests are not logged one by one (hot path); errors are logged by the error handler, with the request's id by
    // a child logger made only then (lazyRequestLogger below).
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: lazyRequestLogger,
    genReqId: () => newId('req'),
    bodyLimit: deps.config.bodyLimitBytes,
    trustProxy: false,
    return503OnClosing: true,
    routerOptions: { ignoreTrailingSlash: true },
    // A URL the router cannot read (bad percent-encoding, an over-long id) still gets the spec's error object.
    frameworkErrors: sendFrameworkError,
    // The whole request (headers and body) must arrive within 30 s; answers may take longer (streams, slow providers).
    requestTimeout: 30_000,
    clientErrorHandler: (err, socket) => writeClientError(socket, err, listenBase),
    schemaController: { compilersFactory: { buildSerializer: lazySerializers(deps.config.checkResponses) } },
  });
  // CONNECT is not routed by Node's HTTP server at all: answer it like an unknown method instead of dropping it.
  app.server.on('connect', (_req, socket: Duplex) => {
    writeClientError(socket, Object.assign(new Error('CONNECT'), { code: 'HPE_INVALID_METHOD' }), listenBase);
  });
  app.decorate('deps', deps);
  app.decorate('ports', deps.ports);
  app.decorateRequest('ctx', null as unknown as Ctx);

  app.setValidatorCompiler(
    routeValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? bodyAjv.compile(schema) : queryAjv.compile(schema))),
  );

  // An empty body with Content-Type: application/json is no body, not an error (curl -X POST on revoke).
  parseJsonBodies(app, () => ({ error: Object.assign(new SyntaxError('The body is not valid JSON.'), { statusCode: 400 }) }));

  // First: the request's trace span (when tracing is on) wraps every hook after it; and the OpenAPI generator must be
  // registered before the routes it describes.
  await app.register(observabilityHooks);
  // Hooks that await nothing are synchronous (done callback): no promise per request (issue 16).
  app.addHook('onRequest', (req, reply, done) => {
    reply.header('X-Svc-Request-Id', req.id);
    done();
  });
  registerErrorHandling(app);
  registerStrictInput(app);
  if (deps.config.checkResponses) registerResponseCheck(app);
  // The rate limiter runs inside the auth hook, between authentication and the scope check.
  const identify = registerAuth(app, deps.observability.step('svc.rate_limit', rateLimitRequest));
  registerNotFoundHandler(app, identify);
  registerRateLimitHeaders(app);
  registerProjectNames(app);
  // Idempotency-Key (hooks/idempotency.ts), entered only by a request that sends the header (most send none).
  const idempotency = idempotencyHooks(
    app,
    new SealedIdempotencyStore(
      deps.redis ? new RedisIdempotencyStore(deps.redis, deps.config.redisPrefix) : new PrismaIdempotencyStore(deps.db),
      deps.webhooks.secretBox,
    ),
  );
  app.addHook('preValidation', (req, reply, done) => (req.headers['idempotency-key'] === undefined ? done() : idempotency.begin(req, reply, done)));
  app.addHook('onSend', (req, reply, payload, done) => (req.idempotency === undefined ? done(null, payload) : idempotency.finish(req, reply, payload, done)));

  await app.register(healthRoutes);
  await app.register(observabilityRoutes);
  await app.register(docsRoutes);
  await app.register(adminRoutes);
  await app.register(projectsRoutes);
  await app.register(keysRoutes);
  await app.register(auditRoutes);
  await app.register(rateLimitsRoutes);
  await app.register(budgetsRoutes);
  await app.register(customersRoutes);
  await app.register(graphqlRoutes);
  await app.register(webhooksRoutes);
  await app.register(mcpRoutes);
  await app.register(inferenceRoutes);
  await app.register(openaiRoutes);
  await app.register(anthropicRoutes);
  await app.register(responsesRoutes);
  await app.register(geminiRoutes);
  await app.register(usageRoutes);
  await app.register(requestsRoutes);
  await app.register(routingRoutes);
  await app.register(governanceRoutes);
  await app.register(privacyRoutes);
  await app.register(approvalsRoutes);
  await app.register(evalsRoutes);
  await app.register(batchesRoutes);
  await app.register(filesRoutes);
  await app.register(riskRoutes);
  await app.register(opsRoutes);
  await app.register(legalRoutes);
  await app.register(devRoutes);
  await app.register(ssoRoutes);
  await app.register(scimRoutes);
  await app.register(operatorsRoutes);
  await app.register(ragRoutes);
  await app.register(templatesRoutes);
  return app;
}

/**
 * A request's logger, made only when the request logs something. Fastify gives every request a child logger bound to
 * its request id; pino makes one with its bindings serialized (and redaction set up) at once, which showed in the hot
 * path's profile although a request that goes well logs nothing (request logging is off). This one forwards to the
 * real child, created on the first call.
 */
class LazyRequestLogger {
  private made: FastifyBaseLogger | null = null;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  private get real(): FastifyBaseLogger {
    return (this.made ??= this.parent.child(this.bindings, this.options));
  }

  get level(): LevelWithSilentOrString {
    return this.parent.level;
  }
  set level(level: LevelWithSilentOrString) {
    this.real.level = level;
  }
  fatal(...args: unknown[]): void {
    (this.real.fatal as (...a: unknown[]) => void)(...args);
  }
  error(...args: unknown[]): void {
    (this.real.error as (...a: unknown[]) => void)(...args);
  }
  warn(...args: unknown[]): void {
    (this.real.warn as (...a: unknown[]) => void)(...args);
  }
  info(...args: unknown[]): void {
    (this.real.info as (...a: unknown[]) => void)(...args);
  }
  debug(...args: unknown[]): void {
    (this.real.debug as (...a: unknown[]) => void)(...args);
  }
  trace(...args: unknown[]): void {
    (this.real.trace as (...a: unknown[]) => void)(...args);
  }
  silent(): void {}
  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.real.child(bindings, options);
  }
}

const lazyRequestLogger = (logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger =>
  new LazyRequestLogger(logger, bindings, options) as unknown as FastifyBaseLogger;
