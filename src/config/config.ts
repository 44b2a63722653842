import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Type, type Static, type TSchema } from 'typebox';
import { Format } from 'typebox/format';
import { Default, Errors } from 'typebox/value';
import { parseAllowlist } from '../kernel/egress.ts';
import { CidrList } from '../kernel/cidr.ts';
import { BUILTIN_PROVIDERS, loadProvidersFile, ProvidersFileError, type ProviderSpec } from '../providers/config-file.ts';
import { pointer, problemFor, says, show, valueAt } from './schema-errors.ts';

/** One typed, frozen view of the environment (CONTRACT §1). A bad value throws ConfigError naming the variable. */
export interface Config {
  host: string;
  port: number;
  databaseUrl: string | null;
  /**
   * CONTRACT §18: a direct PostgreSQL connection (DATABASE_DIRECT_URL, with DATABASE_URL's `?schema=`) for migrations,
   * LISTEN and the sweeps' advisory locks, when DATABASE_URL is a transaction-pooling PgBouncer; null: DATABASE_URL.
   */
  databaseDirectUrl: string | null;
  /** CONTRACT §18: a read replica (DATABASE_READ_URL, with DATABASE_URL's `?schema=`) for usage and audit lists; null: none. */
  databaseReadUrl: string | null;
  /** Connections of DATABASE_URL's pool (and of DATABASE_READ_URL's) in each process (DATABASE_POOL_SIZE). */
  databasePoolSize: number;
  dataDir: string;
  redisUrl: string | null;
  /**
   * How to reach Redis (CONTRACT §18): one server (REDIS_URL), a Cluster (REDIS_CLUSTER_NODES) or Sentinel
   * (REDIS_SENTINELS + REDIS_SENTINEL_NAME); null: the in-process store. Exactly one mode is set.
   */
  redis: RedisConnectionConfig | null;
  /** The usage stream's shards (SVC_USAGE_STREAM_SHARDS; unset: 1 on one server or Sentinel, 6 on a Cluster). */
  usageStreamShards: number;
  /** Prefix for every Redis key, so that test runs and deployments can share one Redis. */
  redisPrefix: string;
  /** A Redis command not answered by then fails (a frozen Redis must not hold requests; see README). */
  redisCommandTimeoutMs: number;
  masterKey: string | null;
  providersFile: string | null;
  webhookRetryScheduleS: number[];
  webhookRetryHorizonS: number;
  /** The receiver's deadline per attempt (spec 6.1.2: 10 s). */
  webhookTimeoutMs: number;
  /** Active webhooks a project may have (disabled ones do not count); Stripe's default endpoint limit is 16. */
  maxWebhooksPerProject: number;
  egressAllowlist: string[];
  smtpUrl: string | null;
  alertEmailFrom: string | null;
  /** Recipients of budget alert e-mails; empty: the sender address itself. */
  alertEmailTo: string[];
  /** The operator key's own request window (it belongs to no project). */
  operatorRequestsPerMinute: number;
  /** Base of error doc_url links; unset: derived from the request's host. */
  publicUrl: string | null;
  /** 32-byte key (hex or base64) for webhook signing secrets at rest; unset: generated in dataDir. */
  encryptionKey: string | null;
  bodyLimitBytes: number;
  logLevel: string;
  production: boolean;
  /**
   * SVC_CHECK_RESPONSES: every answer whose route declares a response schema is also serialized with JSON.stringify
   * and must come out byte for byte the same, else 500 (the test suite's guard that a schema leaves nothing out).
   */
  checkResponses: boolean;
  graphqlIntrospection: boolean;
  routingTimeoutMs: number;
  /** From SVC_PROVIDERS_FILE, validated; unset: the built-in mock provider. */
  providers: readonly ProviderSpec[];
  /** Consecutive failures that open a provider's circuit breaker. */
  circuitFailureThreshold: number;
  /** How long an open circuit skips its provider before a probe. */
  circuitCooldownMs: number;
  /** Without Redis: how often the in-process batch of usage records is written (the crash-loss window). */
  outcomeFlushMs: number;
  /** With Redis: the usage-stream consumer reads at most one batch per interval (the entries are durable meanwhile). */
  outcomeStreamMs: number;
  /** CONTRACT §11: PII redaction's deadline (SVC_PII_TIMEOUT_MS). */
  piiTimeoutMs: number;
  /** With Redis: how long a read usage-stream entry may stay unwritten before another replica takes it over. */
  outcomeLeaseMs: number;
  /** How long an evaluation run claimed by a worker stays its own without renewal (jobs/eval-runner). */
  evalLeaseMs: number;
  /** How long a vertical job claimed by a worker stays its own (jobs/vertical-work); a job whose worker died resumes after it. */
  verticalLeaseMs: number;
  /**
   * CONTRACT §18: how long usage records, webhook events (with their deliveries and attempts) and audit events are
   * kept, in days; older months are dropped whole by the partition upkeep (jobs/partition-upkeep).
   */
  usageRetentionDays: number;
  eventsRetentionDays: number;
  auditRetentionDays: number;
  /**
   * What this process runs (README "Running several replicas"): `all` (default) serves HTTP and does the background
   * work (usage-stream consumer, webhook delivery worker, daily usage summaries); `api` serves HTTP only; `worker` does
   * the background work and serves only /healthz and /readyz. `api` and `worker` need DATABASE_URL and REDIS_URL.
   */
  role: 'all' | 'api' | 'worker';
  /** Operators of the admin console (issue 22, CONTRACT §17): sign-in methods, sessions, SCIM, the console allowlist. */
  operators: OperatorsConfig;
  /** Observability (README "Metrics and traces"): /metrics counters and the optional OpenTelemetry export. */
  observability: ObservabilityConfig;
}

/** A Redis node as `host:port` (IPv6 in brackets). */
export interface RedisNode {
  host: string;
  port: number;
}

export type RedisConnectionConfig =
  | { mode: 'single'; url: string }
  | { mode: 'cluster'; nodes: RedisNode[] }
  | { mode: 'sentinel'; sentinels: RedisNode[]; name: string };

export interface OperatorsConfig {
  oidc: { issuer: string; clientId: string; clientSecret: string | null; usernameClaim: string; scopes: string } | null;
  saml: { entryPoint: string; idpCert: string; entityId: string } | null;
  /** SHA-256 hex of the SCIM bearer token; null: SCIM is off (404). */
  scimTokenHash: string | null;
  idleTimeoutMs: number;
  absoluteTimeoutMs: number;
  consoleAllowlist: string[];
  /** False only for a plain-http loopback SVC_PUBLIC_URL outside production (README: the Secure attribute). */
  secureCookie: boolean;
}

export interface ObservabilityConfig {
  /** SVC_METRICS: false registers no instruments at all (the bench's A/B); /metrics then answers 404. */
  metrics: boolean;
  /** SVC_METRICS_TOKEN: a bearer token for GET /metrics besides the operator key (Prometheus needs no operator key). */
  metricsToken: string | null;
  /** OTLP/HTTP traces endpoint (…/v1/traces); null: tracing off, no SDK loaded. */
  tracesEndpoint: string | null;
  serviceName: string;
  /** Share of root traces sampled (0 to 100); a caller's sampled traceparent is followed. */
  traceSamplePercent: number;
}

export class ConfigError extends Error {
  constructor(readonly variable: string, problem: string) {
    super(`${variable}: ${problem}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

Format.Set('whatwg-url', (v) => URL.canParse(v));

/** host:port, comma-separated; a host is a name, an IPv4 address or a bracketed IPv6 address. */
const NODE_LIST = '^\\s*(?:[A-Za-z0-9_.-]+|\\[[0-9A-Fa-f:.]+\\]):\\d{1,5}\\s*(?:,\\s*(?:[A-Za-z0-9_.-]+|\\[[0-9A-Fa-f:.]+\\]):\\d{1,5}\\s*)*$';
const RANGE = 'must be between {minimum} and {maximum}, got {value}';
const EMAIL = '^[^\\s@,]+@[^\\s@,]+$';

/** A whole number from the environment (digits only). */
const whole = (fallback: number, minimum: number, maximum: number, description: string) =>
  Type.Integer({ default: fallback, minimum, maximum, description, ...says({ type: 'must be a whole number, got {value}', minimum: RANGE, maximum: RANGE }) });

/** A URL (WHATWG parser) with one of `schemes`, kept as written; unset: null. */
const url = (schemes: string[], description: string) =>
  Type.Optional(
    Type.String({
      description,
      format: 'whatwg-url',
      // The scheme case-insensitively, as URL's protocol reads it.
      pattern: `^(?:${schemes.map((s) => s.replace(/[a-z]/g, (c) => `[${c}${c.toUpperCase()}]`)).join('|')}):`,
      ...says({ format: 'is not a valid URL', pattern: `must start with ${schemes.map((s) => `${s}://`).join(' or ')}` }),
    }),
  );

const text = (description: string) => Type.Optional(Type.String({ description }));

/**
 * Every variable the gateway reads (README "Configuration"), with its type, bounds, default and wording. A value is
 * trimmed (blank is unset) and decoded by its node's type before the check (see readEnvironment); rules across
 * variables or beyond a schema follow in loadConfig. Property order is the order in which problems are reported.
 */
export const EnvironmentSchema = Type.Object({
  SVC_WEBHOOK_RETRY_SCHEDULE: Type.String({
    default: '0,30,120,600,3600,21600',
    pattern: '^\\s*\\d+\\s*(?:,\\s*\\d+\\s*)*$',
    description: 'when each webhook attempt is due, in seconds after the first attempt (never decreasing)',
    ...says('must be comma-separated whole seconds, e.g. 0,30,120'),
  }),
  SVC_PUBLIC_URL: url(['http', 'https'], 'base of error.doc_url links; unset: the request host'),
  HOST: Type.String({ default: '127.0.0.1', description: 'where the HTTP server listens' }),
  PORT: whole(8080, 0, 65535, 'where the HTTP server listens'),
  DATABASE_URL: url(['postgresql', 'postgres'], 'PostgreSQL; unset: embedded PGlite'),
  DATABASE_DIRECT_URL: url(['postgresql', 'postgres'], 'direct PostgreSQL for migrations, LISTEN and advisory locks when DATABASE_URL is a transaction-pooling PgBouncer'),
  DATABASE_READ_URL: url(['postgresql', 'postgres'], 'read replica for usage and audit lists; a read that could miss a committed write goes to DATABASE_URL'),
  DATABASE_POOL_SIZE: whole(10, 1, 1000, "connections of DATABASE_URL's pool per process (and of DATABASE_READ_URL's)"),
  SVC_DATA_DIR: Type.String({ default: './.svc-data', description: 'directory of the embedded database and generated local secrets' }),
  REDIS_URL: url(['redis', 'rediss'], 'Redis; unset: in-process store'),
  REDIS_CLUSTER_NODES: Type.Optional(
    Type.String({
      pattern: NODE_LIST,
      description: 'Redis Cluster seed nodes, comma-separated host:port (instead of REDIS_URL)',
      ...says('must be comma-separated host:port, e.g. redis-1:6379,redis-2:6379'),
    }),
  ),
  REDIS_SENTINELS: Type.Optional(
    Type.String({
      pattern: NODE_LIST,
      description: 'Redis Sentinels, comma-separated host:port (with REDIS_SENTINEL_NAME; instead of REDIS_URL)',
      ...says('must be comma-separated host:port, e.g. sentinel-1:26379,sentinel-2:26379'),
    }),
  ),
  REDIS_SENTINEL_NAME: text('the master name the Sentinels watch (with REDIS_SENTINELS)'),
  SVC_USAGE_STREAM_SHARDS: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: 256,
      description: 'shards of the usage stream (unset: 1 on one server or Sentinel, 6 on a Cluster)',
      ...says({ type: 'must be a whole number, got {value}', minimum: RANGE, maximum: RANGE }),
    }),
  ),
  SVC_REDIS_PREFIX: Type.String({ default: 'svc:', description: 'prefix of every Redis key' }),
  SVC_REDIS_COMMAND_TIMEOUT_MS: whole(500, 10, 60_000, 'a Redis command not answered by then fails'),
  SVC_MASTER_KEY: text('operator key: begins svc_sk_, at least 32 characters; unset: generated at first start'),
  SVC_PROVIDERS_FILE: text('JSON or YAML providers file; unset: the built-in mock provider'),
  SVC_WEBHOOK_RETRY_HORIZON_S: whole(86_400, 1, 30 * 86_400, 'seconds without success after which a delivery is failed'),
  SVC_WEBHOOK_TIMEOUT_MS: whole(10_000, 100, 60_000, "a webhook receiver's deadline per attempt"),
  SVC_MAX_WEBHOOKS_PER_PROJECT: whole(16, 1, 1000, 'active webhooks a project may have'),
  SVC_EGRESS_ALLOWLIST: Type.Array(Type.String(), { default: [], description: 'comma-separated hosts/IPs/CIDRs webhooks may reach although private' }),
  SVC_SMTP_URL: url(['smtp', 'smtps'], 'server for budget alert e-mails; unset: e-mail alerts skipped'),
  SVC_ALERT_EMAIL_FROM: Type.Optional(
    Type.String({ pattern: EMAIL, description: 'sender of budget alert e-mails', ...says('{value} is not an e-mail address') }),
  ),
  SVC_ALERT_EMAIL_TO: Type.Array(Type.String({ pattern: EMAIL, ...says('{value} is not an e-mail address; use comma-separated addresses') }), {
    default: [],
    description: 'comma-separated recipients of budget alert e-mails; empty: the sender address',
  }),
  SVC_OPERATOR_RPM: whole(6_000, 1, 2_147_483_647, "the operator key's own requests per minute"),
  SVC_ENCRYPTION_KEY: text('32 bytes (64 hex characters or base64) encrypting secrets at rest; unset: generated in SVC_DATA_DIR'),
  SVC_BODY_LIMIT_BYTES: whole(1_048_576, 1024, 100 * 1_048_576, 'larger request bodies are refused'),
  LOG_LEVEL: Type.Enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
    default: 'info',
    description: 'pino level',
    ...says('must be one of fatal, error, warn, info, debug, trace, silent'),
  }),
  SVC_GRAPHQL_INTROSPECTION: Type.Optional(
    Type.Boolean({ description: 'GraphQL introspection; unset: on unless NODE_ENV=production', ...says({ type: 'must be true or false, got {value}' }) }),
  ),
  SVC_ROUTING_TIMEOUT_MS: whole(30_000, 100, 600_000, 'all provider hops of one inference together'),
  SVC_CIRCUIT_FAILURES: whole(5, 1, 1000, "consecutive failures that open a provider's circuit breaker"),
  SVC_CIRCUIT_COOLDOWN_MS: whole(30_000, 1, 3_600_000, 'how long an open circuit skips its provider before one probe'),
  SVC_OUTCOME_FLUSH_MS: whole(20, 1, 10_000, 'without Redis: how often the in-process batch of usage records is written'),
  SVC_OUTCOME_STREAM_MS: whole(100, 1, 10_000, 'with Redis: at most one batch of usage records read from the stream per interval'),
  SVC_PII_TIMEOUT_MS: whole(250, 1, 60_000, 'the PII redaction deadline'),
  SVC_OUTCOME_LEASE_MS: whole(5_000, 500, 3_600_000, 'with Redis: how long a read usage-stream entry may stay unwritten'),
  SVC_EVAL_LEASE_MS: whole(30_000, 1_000, 3_600_000, 'how long a worker holds an evaluation run without renewing; a run whose worker died resumes after it'),
  SVC_USAGE_RETENTION_DAYS: whole(400, 1, 36_500, 'days usage records are kept; older months are dropped whole'),
  SVC_EVENTS_RETENTION_DAYS: whole(30, 1, 36_500, 'days webhook events, their deliveries and attempts are kept; older months are dropped whole'),
  SVC_AUDIT_RETENTION_DAYS: whole(400, 1, 36_500, 'days audit events are kept; older months are dropped whole'),
  SVC_VERTICAL_LEASE_MS: whole(300_000, 1_000, 3_600_000, "how long a worker holds a vertical's model-work job; a job whose worker died resumes after it"),
  SVC_SESSION_IDLE_TIMEOUT_S: whole(1_800, 1, 7 * 86_400, 'a console session unused this long ends'),
  SVC_SESSION_ABSOLUTE_TIMEOUT_S: whole(43_200, 1, 30 * 86_400, 'a console session ends this long after sign-in, however active'),
  SVC_CONSOLE_IP_ALLOWLIST: Type.Array(Type.String(), { default: [], description: 'comma-separated CIDRs the console may be used from; empty: any' }),
  SVC_OIDC_ISSUER: url(['https', 'http'], 'OpenID Connect issuer of console sign-in; unset: no OIDC sign-in'),
  SVC_OIDC_CLIENT_ID: text("the gateway's client id at the OpenID provider"),
  SVC_OIDC_CLIENT_SECRET: text("the gateway's client secret at the OpenID provider (unset: a public client, PKCE only)"),
  SVC_OIDC_USERNAME_CLAIM: Type.String({ default: 'email', description: 'ID token claim matched with the SCIM userName' }),
  SVC_OIDC_SCOPES: Type.String({ default: 'openid email profile', description: 'scopes asked of the OpenID provider' }),
  SVC_SAML_ENTRY_POINT: url(['https', 'http'], "SAML 2.0 identity provider's SSO URL (HTTP-Redirect binding); unset: no SAML sign-in"),
  SVC_SAML_IDP_CERT: text("the identity provider's signing certificate: PEM, or the path of a PEM file"),
  SVC_SAML_ENTITY_ID: text("the gateway's SAML entity id; unset: <SVC_PUBLIC_URL>/auth/saml/metadata"),
  SVC_SCIM_TOKEN: text('bearer token of SCIM provisioning (only its SHA-256 is kept); unset: SCIM is off'),
  SVC_SCIM_TOKEN_SHA256: text("SHA-256 (hex) of SCIM's bearer token, instead of the token itself"),
  SVC_ROLE: Type.Enum(['all', 'api', 'worker'], {
    default: 'all',
    'x-lowercase': true,
    description: 'what this process runs: all, api (HTTP only) or worker (background work)',
    ...says('must be all, api or worker, got {value}'),
  }),
  SVC_METRICS: Type.Boolean({ default: true, description: 'false: no metrics instruments, /metrics answers 404', ...says({ type: 'must be true or false, got {value}' }) }),
  SVC_CHECK_RESPONSES: Type.Boolean({ default: false, description: 'true: each answer is checked against its route response schema (tests)', ...says({ type: 'must be true or false, got {value}' }) }),
  SVC_METRICS_TOKEN: Type.Optional(
    Type.String({ minLength: 16, pattern: '^[\\x21-\\x7e]+$', description: 'bearer token for GET /metrics (the operator key works too)', ...says('must be at least 16 printable characters without spaces') }),
  ),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: url(['http', 'https'], 'OTLP/HTTP traces endpoint; set (or OTEL_EXPORTER_OTLP_ENDPOINT): tracing on'),
  OTEL_EXPORTER_OTLP_ENDPOINT: url(['http', 'https'], 'OTLP/HTTP base endpoint; traces go to <it>/v1/traces'),
  OTEL_SERVICE_NAME: Type.String({ default: 'svc-gateway', description: 'service.name of the exported spans' }),
  OTEL_SDK_DISABLED: Type.Boolean({ default: false, description: 'true: tracing off whatever the endpoint', ...says({ type: 'must be true or false, got {value}' }) }),
  SVC_TRACE_SAMPLE_PERCENT: whole(100, 0, 100, 'share of root traces sampled'),
});
export type Environment = Static<typeof EnvironmentSchema>;

const TRUE = ['1', 'true', 'yes', 'on'];
const FALSE = ['0', 'false', 'no', 'off'];

/** A trimmed, non-blank value as its schema node's type; left as it is when it does not read as one (the check says why). */
function decode(node: TSchema, raw: string): unknown {
  switch ((node as { type?: unknown }).type) {
    case 'integer':
      return /^\d+$/.test(raw) ? Number(raw) : raw;
    case 'boolean':
      return TRUE.includes(raw.toLowerCase()) ? true : FALSE.includes(raw.toLowerCase()) ? false : raw;
    case 'array':
      return raw.split(',').map((s) => s.trim()).filter(Boolean);
    default:
      return (node as { 'x-lowercase'?: boolean })['x-lowercase'] ? raw.toLowerCase() : raw;
  }
}

/** The environment through EnvironmentSchema; its first problem throws a ConfigError naming the variable. */
export function readEnvironment(env: Env): Environment {
  const decoded: Record<string, unknown> = {};
  for (const [name, node] of Object.entries(EnvironmentSchema.properties)) {
    const raw = env[name]?.trim();
    if (raw) decoded[name] = decode(node, raw);
  }
  const values = Default(EnvironmentSchema, decoded);
  const [error] = Errors(EnvironmentSchema, values);
  if (error) {
    const at = pointer(error.instancePath);
    const problem = problemFor(EnvironmentSchema, pointer(error.schemaPath.slice(1)), error);
    throw new ConfigError(at[0]!, problem.replace('{value}', () => show(valueAt(values, at))));
  }
  return values as Environment;
}

// Printable ASCII without spaces: it is sent as `Authorization: Bearer <key>`.
const MASTER_KEY = /^svc_sk_[\x21-\x7e]{25,}$/;

export function loadConfig(env: Env = process.env): Readonly<Config> {
  const e = readEnvironment(env);
  if (e.SVC_MASTER_KEY !== undefined && !MASTER_KEY.test(e.SVC_MASTER_KEY)) {
    throw new ConfigError('SVC_MASTER_KEY', 'must begin with svc_sk_ and be at least 32 characters, without spaces');
  }
  const webhookRetryScheduleS = e.SVC_WEBHOOK_RETRY_SCHEDULE.split(',').map(Number);
  for (let i = 1; i < webhookRetryScheduleS.length; i++) {
    if (webhookRetryScheduleS[i]! < webhookRetryScheduleS[i - 1]!) {
      throw new ConfigError('SVC_WEBHOOK_RETRY_SCHEDULE', 'delays must not decrease');
    }
  }
  // A delivery still retrying must not be dropped with its month (jobs/partition-upkeep).
  if (e.SVC_EVENTS_RETENTION_DAYS * 86_400 < e.SVC_WEBHOOK_RETRY_HORIZON_S) {
    throw new ConfigError(
      'SVC_EVENTS_RETENTION_DAYS',
      `must cover SVC_WEBHOOK_RETRY_HORIZON_S (${e.SVC_WEBHOOK_RETRY_HORIZON_S} s): a delivery still retrying would be dropped`,
    );
  }
  // As set, untrimmed (not a gateway variable of its own).
  const production = (env.NODE_ENV ?? '') === 'production';

  const config: Config = {
    host: e.HOST,
    port: e.PORT,
    databaseUrl: e.DATABASE_URL ?? null,
    databaseDirectUrl: sameSchemaUrl(e, 'DATABASE_DIRECT_URL'),
    databaseReadUrl: sameSchemaUrl(e, 'DATABASE_READ_URL'),
    databasePoolSize: e.DATABASE_POOL_SIZE,
    dataDir: path.resolve(e.SVC_DATA_DIR),
    redisUrl: e.REDIS_URL ?? null,
    redis: redisFrom(e),
    usageStreamShards: e.SVC_USAGE_STREAM_SHARDS ?? (e.REDIS_CLUSTER_NODES !== undefined ? 6 : 1),
    redisPrefix: e.SVC_REDIS_PREFIX,
    redisCommandTimeoutMs: e.SVC_REDIS_COMMAND_TIMEOUT_MS,
    masterKey: e.SVC_MASTER_KEY ?? null,
    providersFile: e.SVC_PROVIDERS_FILE ?? null,
    webhookRetryScheduleS,
    webhookRetryHorizonS: e.SVC_WEBHOOK_RETRY_HORIZON_S,
    webhookTimeoutMs: e.SVC_WEBHOOK_TIMEOUT_MS,
    maxWebhooksPerProject: e.SVC_MAX_WEBHOOKS_PER_PROJECT,
    egressAllowlist: e.SVC_EGRESS_ALLOWLIST,
    smtpUrl: e.SVC_SMTP_URL ?? null,
    alertEmailFrom: e.SVC_ALERT_EMAIL_FROM ?? null,
    alertEmailTo: e.SVC_ALERT_EMAIL_TO,
    operatorRequestsPerMinute: e.SVC_OPERATOR_RPM,
    publicUrl: e.SVC_PUBLIC_URL?.replace(/\/+$/, '') ?? null,
    encryptionKey: e.SVC_ENCRYPTION_KEY ?? null,
    bodyLimitBytes: e.SVC_BODY_LIMIT_BYTES,
    logLevel: e.LOG_LEVEL,
    production,
    checkResponses: e.SVC_CHECK_RESPONSES,
    graphqlIntrospection: e.SVC_GRAPHQL_INTROSPECTION ?? !production,
    routingTimeoutMs: e.SVC_ROUTING_TIMEOUT_MS,
    providers: providersFrom(e.SVC_PROVIDERS_FILE, env),
    circuitFailureThreshold: e.SVC_CIRCUIT_FAILURES,
    circuitCooldownMs: e.SVC_CIRCUIT_COOLDOWN_MS,
    outcomeFlushMs: e.SVC_OUTCOME_FLUSH_MS,
    outcomeStreamMs: e.SVC_OUTCOME_STREAM_MS,
    piiTimeoutMs: e.SVC_PII_TIMEOUT_MS,
    outcomeLeaseMs: e.SVC_OUTCOME_LEASE_MS,
    evalLeaseMs: e.SVC_EVAL_LEASE_MS,
    verticalLeaseMs: e.SVC_VERTICAL_LEASE_MS,
    usageRetentionDays: e.SVC_USAGE_RETENTION_DAYS,
    eventsRetentionDays: e.SVC_EVENTS_RETENTION_DAYS,
    auditRetentionDays: e.SVC_AUDIT_RETENTION_DAYS,
    role: e.SVC_ROLE,
    operators: operatorsFrom(e, production),
    observability: {
      metrics: e.SVC_METRICS,
      metricsToken: e.SVC_METRICS_TOKEN ?? null,
      tracesEndpoint: e.OTEL_SDK_DISABLED
        ? null
        : (e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ??
          (e.OTEL_EXPORTER_OTLP_ENDPOINT ? `${e.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces` : null)),
      serviceName: e.OTEL_SERVICE_NAME,
      traceSamplePercent: e.SVC_TRACE_SAMPLE_PERCENT,
    },
  };
  if (config.role !== 'all' && (config.databaseUrl === null || config.redis === null)) {
    // Without them the usage records wait in this process's memory and the database is this process's own.
    throw new ConfigError(
      'SVC_ROLE',
      `${config.role} needs DATABASE_URL and Redis (REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS; shared by the api and worker processes)`,
    );
  }
  try {
    parseAllowlist(config.egressAllowlist);
  } catch (err) {
    throw new ConfigError('SVC_EGRESS_ALLOWLIST', `${(err as Error).message}; use comma-separated hostnames, IPs or CIDRs`);
  }
  if (config.encryptionKey !== null && decodeKey(config.encryptionKey) === null) {
    throw new ConfigError('SVC_ENCRYPTION_KEY', 'must be 32 bytes as 64 hex characters or base64');
  }
  return Object.freeze(config);
}

/** CONTRACT §18: exactly one of REDIS_URL, REDIS_CLUSTER_NODES, REDIS_SENTINELS (+ REDIS_SENTINEL_NAME), or none. */
function redisFrom(e: Environment): RedisConnectionConfig | null {
  const set = (['REDIS_URL', 'REDIS_CLUSTER_NODES', 'REDIS_SENTINELS'] as const).filter((v) => e[v] !== undefined);
  if (set.length > 1) throw new ConfigError(set[1]!, `cannot be set together with ${set[0]} (one Redis mode: REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS)`);
  if (e.REDIS_SENTINEL_NAME !== undefined && e.REDIS_SENTINELS === undefined) {
    throw new ConfigError('REDIS_SENTINEL_NAME', 'is only read with REDIS_SENTINELS (set both, or neither)');
  }
  if (e.REDIS_URL !== undefined) return { mode: 'single', url: e.REDIS_URL };
  if (e.REDIS_CLUSTER_NODES !== undefined) return { mode: 'cluster', nodes: nodeList('REDIS_CLUSTER_NODES', e.REDIS_CLUSTER_NODES) };
  if (e.REDIS_SENTINELS !== undefined) {
    if (e.REDIS_SENTINEL_NAME === undefined) throw new ConfigError('REDIS_SENTINEL_NAME', 'must be set with REDIS_SENTINELS (the master name the Sentinels watch)');
    return { mode: 'sentinel', sentinels: nodeList('REDIS_SENTINELS', e.REDIS_SENTINELS), name: e.REDIS_SENTINEL_NAME };
  }
  return null;
}

function nodeList(variable: string, raw: string): RedisNode[] {
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      const at = s.lastIndexOf(':');
      const host = s.slice(0, at).replace(/^\[(.*)\]$/, '$1');
      const port = Number(s.slice(at + 1));
      if (!Number.isInteger(port) || port < 1 || port > 65535) throw new ConfigError(variable, `port of ${s} must be between 1 and 65535`);
      return { host, port };
    });
}

/**
 * DATABASE_DIRECT_URL / DATABASE_READ_URL reach the same tables as DATABASE_URL: they need it, and take its `?schema=`
 * when they name none (naming another is refused).
 */
function sameSchemaUrl(e: Environment, name: 'DATABASE_DIRECT_URL' | 'DATABASE_READ_URL'): string | null {
  const value = e[name];
  if (value === undefined) return null;
  if (e.DATABASE_URL === undefined) throw new ConfigError(name, 'needs DATABASE_URL (the primary, or the PgBouncer in front of it)');
  const main = new URL(e.DATABASE_URL).searchParams.get('schema');
  const u = new URL(value);
  const own = u.searchParams.get('schema');
  if (own !== null && own !== (main ?? 'public')) {
    throw new ConfigError(name, `names schema ${own} but DATABASE_URL ${main === null ? 'names none (public)' : `names ${main}`}`);
  }
  if (own === null && main !== null) u.searchParams.set('schema', main);
  return own === null && main !== null ? u.toString() : value;
}

/** CONTRACT §17: the console's sign-in methods, sessions and SCIM (README "Operators: SSO, SCIM, sessions"). */
function operatorsFrom(e: Environment, production: boolean): OperatorsConfig {
  const publicUrl = e.SVC_PUBLIC_URL?.replace(/\/+$/, '') ?? null;
  const needsPublicUrl = (variable: string) => {
    if (publicUrl === null) throw new ConfigError('SVC_PUBLIC_URL', `must be set with ${variable} (the identity provider sends the browser back to it)`);
    return publicUrl;
  };
  let oidc: OperatorsConfig['oidc'] = null;
  if (e.SVC_OIDC_ISSUER !== undefined) {
    needsPublicUrl('SVC_OIDC_ISSUER');
    if (e.SVC_OIDC_CLIENT_ID === undefined) throw new ConfigError('SVC_OIDC_CLIENT_ID', 'must be set with SVC_OIDC_ISSUER');
    oidc = {
      issuer: e.SVC_OIDC_ISSUER,
      clientId: e.SVC_OIDC_CLIENT_ID,
      clientSecret: e.SVC_OIDC_CLIENT_SECRET ?? null,
      usernameClaim: e.SVC_OIDC_USERNAME_CLAIM,
      scopes: e.SVC_OIDC_SCOPES,
    };
  }
  let saml: OperatorsConfig['saml'] = null;
  if (e.SVC_SAML_ENTRY_POINT !== undefined) {
    const base = needsPublicUrl('SVC_SAML_ENTRY_POINT');
    if (e.SVC_SAML_IDP_CERT === undefined) throw new ConfigError('SVC_SAML_IDP_CERT', 'must be set with SVC_SAML_ENTRY_POINT');
    let idpCert = e.SVC_SAML_IDP_CERT;
    if (!idpCert.includes('-----BEGIN')) {
      try {
        idpCert = readFileSync(path.resolve(idpCert), 'utf8');
      } catch (err) {
        throw new ConfigError('SVC_SAML_IDP_CERT', `is neither a PEM certificate nor a readable file (${(err as Error).message})`);
      }
    }
    if (!idpCert.includes('-----BEGIN CERTIFICATE-----')) throw new ConfigError('SVC_SAML_IDP_CERT', 'must be a PEM certificate (-----BEGIN CERTIFICATE-----)');
    saml = { entryPoint: e.SVC_SAML_ENTRY_POINT, idpCert, entityId: e.SVC_SAML_ENTITY_ID ?? `${base}/auth/saml/metadata` };
  }
  let scimTokenHash: string | null = null;
  if (e.SVC_SCIM_TOKEN_SHA256 !== undefined) {
    if (!/^[0-9a-fA-F]{64}$/.test(e.SVC_SCIM_TOKEN_SHA256)) throw new ConfigError('SVC_SCIM_TOKEN_SHA256', 'must be 64 hex characters');
    scimTokenHash = e.SVC_SCIM_TOKEN_SHA256.toLowerCase();
  } else if (e.SVC_SCIM_TOKEN !== undefined) {
    if (e.SVC_SCIM_TOKEN.length < 32 || /\s/.test(e.SVC_SCIM_TOKEN)) throw new ConfigError('SVC_SCIM_TOKEN', 'must be at least 32 characters, without spaces');
    scimTokenHash = createHash('sha256').update(e.SVC_SCIM_TOKEN).digest('hex');
  }
  const consoleAllowlist = e.SVC_CONSOLE_IP_ALLOWLIST;
  try {
    new CidrList(consoleAllowlist);
  } catch (err) {
    throw new ConfigError('SVC_CONSOLE_IP_ALLOWLIST', `${(err as Error).message}; use comma-separated IPs or CIDRs`);
  }
  if (e.SVC_SESSION_IDLE_TIMEOUT_S > e.SVC_SESSION_ABSOLUTE_TIMEOUT_S) {
    throw new ConfigError('SVC_SESSION_IDLE_TIMEOUT_S', 'must not be longer than SVC_SESSION_ABSOLUTE_TIMEOUT_S');
  }
  // The cookie is Secure, except for a plain-http loopback gateway outside production (local trials and tests).
  const loopbackHttp = publicUrl !== null && /^http:\/\/(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?(\/|$)/i.test(publicUrl);
  return {
    oidc,
    saml,
    scimTokenHash,
    idleTimeoutMs: e.SVC_SESSION_IDLE_TIMEOUT_S * 1000,
    absoluteTimeoutMs: e.SVC_SESSION_ABSOLUTE_TIMEOUT_S * 1000,
    consoleAllowlist,
    secureCookie: !(loopbackHttp && !production),
  };
}

/** Whether this process does the background work (usage-stream consumer, webhook delivery, daily summaries). */
export function runsBackgroundWork(config: Pick<Config, 'role'>): boolean {
  return config.role !== 'api';
}

/** 32 bytes from hex or base64, or null when it is neither. */
export function decodeKey(raw: string): Buffer | null {
  if (/^[0-9a-fA-F]{64}$/.test(raw)) return Buffer.from(raw, 'hex');
  const b = Buffer.from(raw, 'base64');
  return b.length === 32 ? b : null;
}

/** CONTRACT §8: the providers file is checked at start; any problem stops the process with the field named. */
function providersFrom(file: string | undefined, env: Env): readonly ProviderSpec[] {
  if (file === undefined) return BUILTIN_PROVIDERS;
  try {
    return loadProvidersFile(path.resolve(file), env);
  } catch (err) {
    if (err instanceof ProvidersFileError) throw new ConfigError('SVC_PROVIDERS_FILE', err.message);
    throw err;
  }
}
