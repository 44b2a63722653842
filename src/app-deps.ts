import pino, { type Logger } from 'pino';
import { runsBackgroundWork, type Config } from './config/config.ts';
import { checkPooledSchema, openDatabase, isUniqueViolation, type Database } from './db/client.ts';
import { DataDirInUseError } from './db/data-dir-lock.ts';
import { applyMigrations } from './db/migrations.ts';
import type { Deps } from './deps.ts';
import { judgeScript } from './domain/evals/judge.ts';
import type { DomainPorts } from './domain/ports.ts';
import { systemClock, type Clock } from './kernel/clock.ts';
import { KeyCache, generateSecret, hashSecret } from './domain/auth/service.ts';
import { LocalBus, type Bus } from './pubsub/bus.ts';
import { RedisBus } from './redis/bus.ts';
import { ProviderRegistry } from './providers/router.ts';
import { MemoryResponseCache } from './domain/inference/cache.ts';
import { RedisResponseCache } from './redis/response-cache.ts';
import { TemplateCache } from './domain/templates/cache.ts';
import type { DeliveryWorkerOptions } from './jobs/webhook-delivery/worker.ts';
import { createWebhookRuntime } from './jobs/webhook-delivery/runtime.ts';
import { createLimiter } from './redis/limiter.ts';
import { connectRedis } from './redis/connection.ts';
import { redisHealthOf } from './redis/health.ts';
import { loadProjectLimits } from './domain/rate-limits/service.ts';
import { BudgetAlertMailer, flushBudgetAlerts } from './jobs/budget-alerts/mailer.ts';
import { loadCachedProject, ProjectCache } from './domain/projects/cache.ts';
import type { ProjectEvictions, ProjectReader } from './domain/projects/ports.ts';
import { CustomerCache, loadCustomerPolicy } from './domain/customers/cache.ts';
import { MemorySpendCounters, type CounterOptions } from './domain/budgets/counters.ts';
import { RedisSpendCounters } from './redis/spend-counters.ts';
import { spentMany } from './domain/budgets/store.ts';
import { usageStreamKeys } from './jobs/outcomes/stream-shards.ts';
import { createOutcomeWriter } from './jobs/outcomes/outcome-writer.ts';
import { PrismaSessionStore } from './domain/operators/session-store.ts';
import { signInSettingsOf } from './domain/operators/directory.ts';
import { RedisSessionStore } from './redis/session-store.ts';
import { CidrList } from './kernel/cidr.ts';
import { createObservability } from './observability/index.ts';
import { traceIdsForLog } from './observability/log-correlation.ts';
import { createEmbeddings } from './domain/inference/service.ts';
import type { InferencePorts } from './domain/inference/ports.ts';
import type { RagPorts } from './domain/rag/ports.ts';
import { RateLimitTicket } from './limits/requests.ts';
import { projectTemplates } from './domain/verticals/ports.ts';
import { egressFetch } from './domain/mcp/egress-fetch.ts';
import type { McpPorts } from './domain/mcp/ports.ts';

export const LOG_REDACT_PATHS = [
  'req.headers.authorization',
  'headers.authorization',
  'authorization',
  // Where the Anthropic and Gemini protocols' clients send the key.
  'req.headers["x-api-key"]',
  'req.headers["x-goog-api-key"]',
  'headers["x-api-key"]',
  'headers["x-goog-api-key"]',
  '*.secret',
  'secret',
  '*.masterKey',
  'config.masterKey',
  'config.encryptionKey',
];

export function createLogger(config: Pick<Config, 'logLevel'>, destination?: pino.DestinationStream): Logger {
  // mixin: trace_id and span_id of the request's span on every line logged inside it, when tracing is on.
  return pino({ level: config.logLevel, redact: { paths: LOG_REDACT_PATHS, censor: '[redacted]' }, mixin: traceIdsForLog }, destination);
}

export interface DepsOverrides {
  clock?: Clock;
  log?: Logger;
  database?: Database;
  /** Where a generated operator key is announced (once, at first start); default stdout. */
  announceMasterKey?: (secret: string) => void;
  /** Delivery worker tuning (tests: a short deadline, a test CA). */
  webhookWorker?: DeliveryWorkerOptions;
}

/** Opens the database (migrating it), Redis and the operator key: everything a request needs, built once. */
export async function createDeps(config: Readonly<Config>, overrides: DepsOverrides = {}): Promise<Deps> {
  const log = overrides.log ?? createLogger(config);
  let database: Database;
  // Never the URL itself: it may hold a password.
  if (!overrides.database) log.info(config.databaseUrl ? 'opening the database: PostgreSQL (DATABASE_URL)' : `opening the database: embedded PGlite in ${config.dataDir}`);
  try {
    database =
      overrides.database ??
      (await openDatabase({
        databaseUrl: config.databaseUrl,
        directUrl: config.databaseDirectUrl,
        readUrl: config.databaseReadUrl,
        poolSize: config.databasePoolSize,
        dataDir: config.dataDir,
        warn: (obj, msg) => log.warn(obj, msg),
        info: (msg) => log.info(msg),
      }));
    if (!overrides.database) {
      // On the direct connection (DATABASE_DIRECT_URL): the migration lock is a session advisory lock.
      await applyMigrations(
        database.kind === 'postgres'
          ? { kind: 'postgres', url: database.directUrl! }
          : { kind: 'pglite', pglite: database.pglite! },
        { log: (msg: string) => log.info(msg) },
      );
    }
    // Prisma's query compiler (WebAssembly) is set up on the first query: done here, so that neither the first request
    // nor the first /readyz (a 1 s check) pays for it.
    await database.prisma.$queryRaw`SELECT 1`;
  } catch (err) {
    // Another process (the gateway, Studio, the migrate script) has the embedded database open: its own line.
    if (err instanceof DataDirInUseError) throw err;
    // One line naming the variable to look at (CONTRACT §1), as for a bad value.
    const what = config.databaseUrl ? 'DATABASE_URL: cannot open PostgreSQL' : `SVC_DATA_DIR: cannot open the embedded database in ${config.dataDir}`;
    throw new Error(`${what} (${(err as Error).message.split('\n')[0]})`);
  }
  // Through PgBouncer the role's search_path must find the schema: its own line, naming the variable.
  await checkPooledSchema(database).catch(async (err: Error) => {
    if (!overrides.database) await database.close().catch(() => {});
    throw err;
  });
  const redis = config.redis ? await connectRedis(config.redis, log) : null;
  if (!redis) log.warn('REDIS_URL is not set: limits, caches and idempotency use an in-process store (one replica only)');
  // One "does Redis answer" state for every user of the shared client (limiter, idempotency, cache, counters, outcomes).
  else redisHealthOf(redis, { log, commandTimeoutMs: config.redisCommandTimeoutMs });
  const masterKeyHash = await resolveMasterKeyHash(config, database, overrides.announceMasterKey ?? announceOnStdout);
  const bus: Bus = redis ? new RedisBus(redis, config.redisPrefix, log) : new LocalBus(config.redisPrefix);
  const clock = overrides.clock ?? systemClock;
  const observability = await createObservability(config.observability, log, { redis: redis !== null });
  const keyCache = new KeyCache(bus, clock);
  const providers = new ProviderRegistry(config.providers, {
    clock,
    log,
    failureThreshold: config.circuitFailureThreshold,
    cooldownMs: config.circuitCooldownMs,
    routingTimeoutMs: config.routingTimeoutMs,
    hops: observability.hops,
    mockScript: judgeScript,
  });
  const responseCache = redis ? new RedisResponseCache(redis, config.redisPrefix) : new MemoryResponseCache(clock);
  const webhooks = createWebhookRuntime(
    { config, db: database.prisma, database, clock, log },
    { onAttempt: observability.webhookAttempt, ...overrides.webhookWorker },
  );
  const limiter = createLimiter({
    redis,
    redisPrefix: config.redisPrefix,
    log,
    bus,
    loadLimits: (projectId) => loadProjectLimits(database.prisma, projectId),
    operatorRequestsPerMinute: config.operatorRequestsPerMinute,
  });
  const projectCache = new ProjectCache(bus, (projectId) => loadCachedProject(database.prisma, projectId));
  const templateCache = new TemplateCache(bus, database.prisma);
  const customerCache = new CustomerCache(bus, (projectId, customer) => loadCustomerPolicy(database.prisma, projectId, customer));
  // The hot path's writes (see README "Performance and the hot path"): month-spend counters and the outcome writer.
  const budgetAlerts = new BudgetAlertMailer(config, log);
  const outcomes = createOutcomeWriter({
    sql: database.sql,
    sealer: webhooks.secretBox,
    clock,
    log,
    handoff: webhooks.worker,
    alerts: budgetAlerts,
    flushMs: config.outcomeFlushMs,
    streamMs: config.outcomeStreamMs,
    redis,
    redisPrefix: config.redisPrefix,
    leaseMs: config.outcomeLeaseMs,
    shards: config.usageStreamShards,
    consume: runsBackgroundWork(config),
  });
  const counterOptions: CounterOptions = {
    seed: (scopes, period) => spentMany(database.prisma, scopes, period),
    beforeSeed: async () => {
      await outcomes.flush({ timeoutMs: 1_000 });
    },
  };
  const spendCounters = redis
    ? new RedisSpendCounters(redis, config.redisPrefix, counterOptions, log)
    : new MemorySpendCounters(counterOptions);
  const operatorSessions = redis ? new RedisSessionStore(redis, config.redisPrefix, () => clock.now()) : new PrismaSessionStore(database.prisma);
  const pieces: Omit<Deps, 'ports'> = {
    config,
    database,
    db: database.prisma,
    clock,
    log,
    redis,
    masterKeyHash,
    bus,
    keyCache,
    providers,
    responseCache,
    webhooks,
    limiter,
    projectCache,
    customerCache,
    templateCache,
    spendCounters,
    outcomes,
    budgetAlerts,
    operatorSessions,
    observability,
  };
  observability.scrapeFrom({
    db: database.prisma,
    redis,
    outcomeStreams: usageStreamKeys(config.redisPrefix, config.usageStreamShards),
    now: () => clock.now(),
    outcomes: () => pieces.outcomes.stats(),
    topCustomers: config.observability.topCustomers,
  });
  // One object: a piece swapped on it later (tests) is what the ports read.
  return Object.assign(pieces, { ports: composePorts(pieces) });
}

/**
 * The ports each capability's services take (src/domain/<capability>/ports.ts), built from the root's pieces. What the
 * request path reads (the project cache, the key cache, the provider registry, the response cache, the outcome sink)
 * is the piece itself, so a request runs no code of the root; a test that swaps one of those pieces swaps it on the
 * ports too (test/helpers/app.ts swapPiece). The rest is read from `deps` when used (tests replace the egress guard).
 */
export function composePorts(deps: Omit<Deps, 'ports'>): DomainPorts {
  const projects: ProjectReader & ProjectEvictions = deps.projectCache;
  const budgets = {
    counters: {
      read: (projectId: string, scopes: readonly string[], period: string) => deps.spendCounters.read(projectId, scopes, period),
      add: (projectId: string, scopes: readonly string[], period: string, micros: bigint) => deps.spendCounters.add(projectId, scopes, period, micros),
      forget: (projectId: string, scopes: readonly string[], period: string) => deps.spendCounters.forget(projectId, scopes, period),
    },
    projects,
    get outcomes() {
      return deps.outcomes;
    },
    customers: { get: (projectId: string, customer: string) => deps.customerCache.get(projectId, customer) },
  };
  // Retained content is sealed with the webhook secrets' key (SVC_ENCRYPTION_KEY or the data dir's key file).
  const sealer = { seal: (p: string, aad: string) => deps.webhooks.secretBox.seal(p, aad), open: (s: string, aad: string) => deps.webhooks.secretBox.open(s, aad) };
  const inferencePrivacy = { sealer, piiTimeoutMs: deps.config.piiTimeoutMs, monotonicNow: () => performance.now() };
  // RAG's embeddings go through the /v1/embeddings service as the caller: a ticket of its own (tokens only: the
  // request was taken by the query's own request, or there is none for the background indexing).
  const rag: RagPorts = {
    get sealer() {
      return deps.webhooks.secretBox;
    },
    embed: async (ctx, projectId, model, texts) => {
      const ticket = new RateLimitTicket(deps.limiter, deps.clock, ctx.caller);
      const out = await createEmbeddings(inference, ctx, ticket, { model, project_id: projectId, input: texts });
      return out.vectors;
    },
    modelType: (model) => deps.providers.modelType(model),
    routesForModel: (model) => deps.providers.routesForModel(model),
  };
  const inference: InferencePorts = {
    providers: deps.providers,
    responseCache: deps.responseCache,
    projects,
    outcomes: deps.observability.observeOutcomes(deps.outcomes),
    budgets,
    privacy: inferencePrivacy,
    templates: deps.templateCache,
    rag,
  };
  // CONTRACT §20: MCP servers are reached through the webhooks' egress guard (SVC_EGRESS_ALLOWLIST), 30 s per request.
  const mcp: McpPorts = {
    get egress() {
      return deps.webhooks.egress;
    },
    get secretBox() {
      return deps.webhooks.secretBox;
    },
    budgets,
    projects,
    fetch: (url, init) => upstreamFetch(url, init),
    piiTimeoutMs: deps.config.piiTimeoutMs,
    upstreamTimeoutMs: 30_000,
  };
  const upstreamFetch = egressFetch({ lookup: (...a) => deps.webhooks.egress.lookup(...a), assertLiteralAllowed: (u) => deps.webhooks.egress.assertLiteralAllowed(u) }, { timeoutMs: 30_000 });
  return {
    mcp,
    customers: {
      policies: { get: (p, c) => deps.customerCache.get(p, c), invalidate: (p, c) => deps.customerCache.invalidate(p, c) },
      counters: { forget: (projectId, scopes, period) => deps.spendCounters.forget(projectId, scopes, period) },
      get outcomes() {
        return deps.outcomes;
      },
    },
    auth: {
      db: deps.db,
      keys: deps.keyCache,
      masterKeyHash: deps.masterKeyHash,
      clock: deps.clock,
      log: deps.log,
    },
    keys: { evictions: { invalidate: (keyId) => deps.keyCache.invalidate(keyId) }, log: deps.log },
    projects: { projects },
    routing: {
      providers: deps.providers,
      projects,
    },
    rateLimits: { limiter: { limitsChanged: (projectId, limits) => deps.limiter.limitsChanged(projectId, limits) } },
    budgets,
    usage: {
      get outcomes() {
        return deps.outcomes;
      },
      // DATABASE_READ_URL: usage and audit lists (db/read-replica.ts).
      get reads() {
        return deps.database.reads;
      },
    },
    audit: {
      get reads() {
        return deps.database.reads;
      },
    },
    // The inference service's sink is observed (metrics, the outcome-write span); the rest read the writer itself.
    inference,
    rag,
    privacy: {
      projects,
      sealer,
      get outcomes() {
        return deps.outcomes;
      },
    },
    templates: {
      providers: deps.providers,
      cache: deps.templateCache,
    },
    webhooks: {
      get egress() {
        return deps.webhooks.egress;
      },
      get secretBox() {
        return deps.webhooks.secretBox;
      },
      maxWebhooksPerProject: deps.config.maxWebhooksPerProject,
    },
    operators: {
      db: deps.db,
      get sessions() {
        return deps.operatorSessions;
      },
      clock: deps.clock,
      log: deps.log,
      settings: {
        idleTimeoutMs: deps.config.operators.idleTimeoutMs,
        absoluteTimeoutMs: deps.config.operators.absoluteTimeoutMs,
        consoleAllowlist: new CidrList(deps.config.operators.consoleAllowlist),
      },
      signIn: signInSettingsOf(deps.config.operators, deps.config.publicUrl),
    },
    // Dev's model work on the request path (a question's answer): the pipeline, the limiter, the project's prompts.
    dev: {
      inference,
      rag,
      get limiter() {
        return deps.limiter;
      },
      prompts: projectTemplates,
      clock: deps.clock,
    },
  };
}

export async function closeDeps(deps: Deps): Promise<void> {
  // CONTRACT §1 shutdown: the usage records still queued are written before anything closes.
  await deps.outcomes.close();
  await flushBudgetAlerts(deps);
  await deps.webhooks.worker.stop();
  await deps.bus.close();
  await deps.providers.close();
  deps.redis?.disconnect();
  await deps.database.close();
  await deps.observability.close();
}

function announceOnStdout(secret: string): void {
  process.stdout.write(
    `\nGenerated operator key (shown once; only its hash is kept). Set SVC_MASTER_KEY to choose your own.\n` +
      `SVC_MASTER_KEY=${secret}\n\n`,
  );
}

/** CONTRACT §1: SVC_MASTER_KEY, or one generated at first start, printed once, with only its hash kept. */
async function resolveMasterKeyHash(config: Readonly<Config>, database: Database, announce: (secret: string) => void): Promise<string> {
  if (config.masterKey) return hashSecret(config.masterKey);
  const stored = await database.prisma.setting.findUnique({ where: { key: 'master_key_hash' } });
  if (stored) return stored.value;
  const secret = generateSecret();
  try {
    await database.prisma.setting.create({ data: { key: 'master_key_hash', value: hashSecret(secret) } });
  } catch (err) {
    // Another replica generated one first: use its hash and announce nothing.
    if (!isUniqueViolation(err)) throw err;
    return (await database.prisma.setting.findUniqueOrThrow({ where: { key: 'master_key_hash' } })).value;
  }
  announce(secret);
  return hashSecret(secret);
}
