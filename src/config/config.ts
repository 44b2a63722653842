import path from 'node:path';
import { parseAllowlist } from '../webhooks/egress.ts';
import { BUILTIN_PROVIDERS, loadProvidersFile, ProvidersFileError, type ProviderSpec } from '../providers/config-file.ts';

/** One typed, frozen view of the environment (CONTRACT §1). A bad value throws ConfigError naming the variable. */
export interface Config {
  host: string;
  port: number;
  databaseUrl: string | null;
  dataDir: string;
  redisUrl: string | null;
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
  /** With Redis: how long a read usage-stream entry may stay unwritten before another replica takes it over. */
  outcomeLeaseMs: number;
  /**
   * What this process runs (README "Running several replicas"): `all` (default) serves HTTP and does the background
   * work (usage-stream consumer, webhook delivery worker, daily usage summaries); `api` serves HTTP only; `worker` does
   * the background work and serves only /healthz and /readyz. `api` and `worker` need DATABASE_URL and REDIS_URL.
   */
  role: 'all' | 'api' | 'worker';
}

export class ConfigError extends Error {
  constructor(readonly variable: string, problem: string) {
    super(`${variable}: ${problem}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

function str(env: Env, name: string): string | null {
  const v = env[name];
  return v === undefined || v.trim() === '' ? null : v.trim();
}

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = str(env, name);
  if (raw === null) return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `must be a whole number, got "${raw}"`);
  const n = Number(raw);
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

function url(env: Env, name: string, protocols: string[]): string | null {
  const raw = str(env, name);
  if (raw === null) return null;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(name, 'is not a valid URL');
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `must start with ${protocols.map((p) => `${p}//`).join(' or ')}`);
  }
  return raw;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = str(env, name);
  if (raw === null) return fallback;
  if (['1', 'true', 'yes', 'on'].includes(raw.toLowerCase())) return true;
  if (['0', 'false', 'no', 'off'].includes(raw.toLowerCase())) return false;
  throw new ConfigError(name, `must be true or false, got "${raw}"`);
}

export function loadConfig(env: Env = process.env): Readonly<Config> {
  const masterKey = str(env, 'SVC_MASTER_KEY');
  // Printable ASCII without spaces: it is sent as `Authorization: Bearer <key>`.
  if (masterKey !== null && (!masterKey.startsWith('svc_sk_') || masterKey.length < 32 || !/^[\x21-\x7e]+$/.test(masterKey))) {
    throw new ConfigError('SVC_MASTER_KEY', 'must begin with svc_sk_ and be at least 32 characters, without spaces');
  }

  const scheduleRaw = str(env, 'SVC_WEBHOOK_RETRY_SCHEDULE') ?? '0,30,120,600,3600,21600';
  const schedule = scheduleRaw.split(',').map((s) => s.trim());
  if (schedule.some((s) => !/^\d+$/.test(s))) {
    throw new ConfigError('SVC_WEBHOOK_RETRY_SCHEDULE', 'must be comma-separated whole seconds, e.g. 0,30,120');
  }
  const webhookRetryScheduleS = schedule.map(Number);
  for (let i = 1; i < webhookRetryScheduleS.length; i++) {
    if (webhookRetryScheduleS[i]! < webhookRetryScheduleS[i - 1]!) {
      throw new ConfigError('SVC_WEBHOOK_RETRY_SCHEDULE', 'delays must not decrease');
    }
  }

  const production = (env.NODE_ENV ?? '') === 'production';
  const publicUrl = url(env, 'SVC_PUBLIC_URL', ['http:', 'https:']);

  const config: Config = {
    host: str(env, 'HOST') ?? '127.0.0.1',
    port: int(env, 'PORT', 8080, 0, 65535),
    databaseUrl: url(env, 'DATABASE_URL', ['postgresql:', 'postgres:']),
    dataDir: path.resolve(str(env, 'SVC_DATA_DIR') ?? './.svc-data'),
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    redisPrefix: str(env, 'SVC_REDIS_PREFIX') ?? 'svc:',
    redisCommandTimeoutMs: int(env, 'SVC_REDIS_COMMAND_TIMEOUT_MS', 500, 10, 60_000),
    masterKey,
    providersFile: str(env, 'SVC_PROVIDERS_FILE'),
    webhookRetryScheduleS,
    webhookRetryHorizonS: int(env, 'SVC_WEBHOOK_RETRY_HORIZON_S', 86_400, 1, 30 * 86_400),
    webhookTimeoutMs: int(env, 'SVC_WEBHOOK_TIMEOUT_MS', 10_000, 100, 60_000),
    maxWebhooksPerProject: int(env, 'SVC_MAX_WEBHOOKS_PER_PROJECT', 16, 1, 1000),
    egressAllowlist: (str(env, 'SVC_EGRESS_ALLOWLIST') ?? '').split(',').map((s) => s.trim()).filter(Boolean),
    smtpUrl: url(env, 'SVC_SMTP_URL', ['smtp:', 'smtps:']),
    alertEmailFrom: emailAddress(env, 'SVC_ALERT_EMAIL_FROM'),
    alertEmailTo: emails(env, 'SVC_ALERT_EMAIL_TO'),
    operatorRequestsPerMinute: int(env, 'SVC_OPERATOR_RPM', 6_000, 1, 2_147_483_647),
    publicUrl: publicUrl ? publicUrl.replace(/\/+$/, '') : null,
    encryptionKey: str(env, 'SVC_ENCRYPTION_KEY'),
    bodyLimitBytes: int(env, 'SVC_BODY_LIMIT_BYTES', 1_048_576, 1024, 100 * 1_048_576),
    logLevel: str(env, 'LOG_LEVEL') ?? 'info',
    production,
    graphqlIntrospection: bool(env, 'SVC_GRAPHQL_INTROSPECTION', !production),
    routingTimeoutMs: int(env, 'SVC_ROUTING_TIMEOUT_MS', 30_000, 100, 600_000),
    providers: providersFrom(env),
    circuitFailureThreshold: int(env, 'SVC_CIRCUIT_FAILURES', 5, 1, 1000),
    circuitCooldownMs: int(env, 'SVC_CIRCUIT_COOLDOWN_MS', 30_000, 1, 3_600_000),
    outcomeFlushMs: int(env, 'SVC_OUTCOME_FLUSH_MS', 20, 1, 10_000),
    outcomeLeaseMs: int(env, 'SVC_OUTCOME_LEASE_MS', 5_000, 500, 3_600_000),
    role: role(env),
  };
  if (config.role !== 'all' && (config.databaseUrl === null || config.redisUrl === null)) {
    // Without them the usage records wait in this process's memory and the database is this process's own.
    throw new ConfigError('SVC_ROLE', `${config.role} needs DATABASE_URL and REDIS_URL (shared by the api and worker processes)`);
  }
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(config.logLevel)) {
    throw new ConfigError('LOG_LEVEL', 'must be one of fatal, error, warn, info, debug, trace, silent');
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

/** Whether this process does the background work (usage-stream consumer, webhook delivery, daily summaries). */
export function runsBackgroundWork(config: Pick<Config, 'role'>): boolean {
  return config.role !== 'api';
}

function role(env: Env): Config['role'] {
  const raw = (str(env, 'SVC_ROLE') ?? 'all').toLowerCase();
  if (raw !== 'all' && raw !== 'api' && raw !== 'worker') throw new ConfigError('SVC_ROLE', `must be all, api or worker, got "${raw}"`);
  return raw;
}

/** One e-mail address, or null when unset. */
function emailAddress(env: Env, name: string): string | null {
  const value = str(env, name);
  if (value === null) return null;
  if (!EMAIL.test(value.trim())) throw new ConfigError(name, `"${value}" is not an e-mail address`);
  return value.trim();
}

const EMAIL = /^[^\s@,]+@[^\s@,]+$/;

/** Comma-separated e-mail addresses. */
function emails(env: Env, name: string): string[] {
  const list = (str(env, name) ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  const bad = list.find((a) => !EMAIL.test(a));
  if (bad !== undefined) throw new ConfigError(name, `"${bad}" is not an e-mail address; use comma-separated addresses`);
  return list;
}

/** 32 bytes from hex or base64, or null when it is neither. */
export function decodeKey(raw: string): Buffer | null {
  if (/^[0-9a-fA-F]{64}$/.test(raw)) return Buffer.from(raw, 'hex');
  const b = Buffer.from(raw, 'base64');
  return b.length === 32 ? b : null;
}

/** CONTRACT §8: the providers file is checked at start; any problem stops the process with the field named. */
function providersFrom(env: Env): readonly ProviderSpec[] {
  const file = str(env, 'SVC_PROVIDERS_FILE');
  if (file === null) return BUILTIN_PROVIDERS;
  try {
    return loadProvidersFile(path.resolve(file), env);
  } catch (err) {
    if (err instanceof ProvidersFileError) throw new ConfigError('SVC_PROVIDERS_FILE', err.message);
    throw err;
  }
}
