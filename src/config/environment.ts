import { Type, type Static, type TSchema } from 'typebox';
import { Format } from 'typebox/format';
import { Default, Errors } from 'typebox/value';
import { pointer, problemFor, says, show, valueAt } from './schema-errors.ts';

/**
 * The environment the gateway reads (CONTRACT §1, docs/CONFIGURATION.md): one TypeBox schema with each variable's
 * type, bounds, default and wording, and readEnvironment, which decodes and checks it. config.ts turns the result into
 * the frozen Config, with the rules across variables.
 */

export class ConfigError extends Error {
  constructor(readonly variable: string, problem: string) {
    super(`${variable}: ${problem}`);
    this.name = 'ConfigError';
  }
}

export type Env = Record<string, string | undefined>;

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
  SVC_METRICS_TOP_CUSTOMERS: whole(0, 0, 1_000, 'end customers with the highest spend this month shown on /metrics (0: none)'),
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
