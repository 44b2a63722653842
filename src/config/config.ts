import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseAllowlist } from '../kernel/egress.ts';
import { CidrList } from '../kernel/cidr.ts';
import { BUILTIN_PROVIDERS, loadProvidersFile, ProvidersFileError, type ProviderSpec } from '../providers/config-file.ts';
import { ConfigError, readEnvironment, type Env, type Environment } from './environment.ts';

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
  /** SVC_METRICS_TOP_CUSTOMERS: the N end customers with the highest month spend on /metrics (CONTRACT §22); 0: none. */
  topCustomers?: number;
  /** OTLP/HTTP traces endpoint (…/v1/traces); null: tracing off, no SDK loaded. */
  tracesEndpoint: string | null;
  serviceName: string;
  /** Share of root traces sampled (0 to 100); a caller's sampled traceparent is followed. */
  traceSamplePercent: number;
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
      topCustomers: e.SVC_METRICS_TOP_CUSTOMERS,
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
