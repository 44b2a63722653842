import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import { closeDeps, createDeps, LOG_REDACT_PATHS } from '../../src/app-deps.ts';
import type { DeliveryWorkerOptions } from '../../src/jobs/webhook-delivery/worker.ts';
import { loadConfig, type Config } from '../../src/config/config.ts';
import { openDatabase, type Database } from '../../src/db/client.ts';
import { applyMigrations } from '../../src/db/migrations.ts';
import type { Deps } from '../../src/deps.ts';
import { buildApp } from '../../src/api/app.ts';
import { FakeClock } from './clock.ts';
import type { GatewayProcess } from './gateway-process.ts';
import { DATABASE_URL, REDIS_URL, deleteRedisPrefix, dropSchema, gatewayDatabaseUrls, uniqueName } from './services.ts';

export const MASTER_KEY = 'svc_sk_test_master_key_0123456789abcdefghijklmnop';
export const TEST_ENCRYPTION_KEY = randomBytes(32).toString('hex');

/** Every log line the app wrote, as text, so tests can grep it for secrets. */
export class LogCapture extends Writable {
  lines: string[] = [];
  override _write(chunk: Buffer, _enc: string, done: () => void): void {
    this.lines.push(...chunk.toString().split('\n').filter(Boolean));
    done();
  }
  get text(): string {
    return this.lines.join('\n');
  }
}

/** One database per test file: a fresh PostgreSQL schema, or an in-memory PGlite. */
export interface TestDatabase {
  database: Database;
  url: string | null;
  /** DATABASE_DIRECT_URL when `url` goes through PgBouncer (npm run test:pgbouncer), else null. */
  directUrl?: string | null;
  drop(): Promise<void>;
}

export async function createTestDatabase(opts: { log?: boolean } = {}): Promise<TestDatabase> {
  if (DATABASE_URL) {
    const schema = uniqueName('t');
    const { url, directUrl } = await gatewayDatabaseUrls(DATABASE_URL, schema);
    await applyMigrations({ kind: 'postgres', url: directUrl ?? url });
    const database = await openDatabase({ databaseUrl: url, directUrl, dataDir: null, poolSize: 5, log: opts.log });
    return {
      database,
      url,
      directUrl,
      drop: async () => {
        await database.close();
        await dropSchema(DATABASE_URL!, schema);
      },
    };
  }
  const database = await openDatabase({ databaseUrl: null, dataDir: null, log: opts.log });
  await applyMigrations({ kind: 'pglite', pglite: database.pglite! });
  return { database, url: null, directUrl: null, drop: () => database.close() };
}

export interface TestApp {
  app: FastifyInstance;
  deps: Deps;
  clock: FakeClock;
  logs: LogCapture;
  config: Readonly<Config>;
  close(): Promise<void>;
}

export interface TestAppOptions {
  env?: Record<string, string>;
  clock?: FakeClock;
  /** Share another app's database (a second replica). */
  database?: TestDatabase;
  redisPrefix?: string;
  /** Adds routes (e.g. a stand-in for a path not built yet) before the app is ready. */
  beforeReady?: (app: FastifyInstance) => void | Promise<void>;
  /** The app's own delivery worker's options (e.g. the test receiver's CA); it is not started. */
  webhookWorker?: DeliveryWorkerOptions;
}

/** Builds the real app on a test database, with the operator key MASTER_KEY and an injected clock. */
export async function buildTestApp(opts: TestAppOptions = {}): Promise<TestApp> {
  const ownDb = opts.database ? null : await createTestDatabase();
  const testDb = opts.database ?? ownDb!;
  const redisPrefix = opts.redisPrefix ?? `${uniqueName('test')}:`;
  const config = loadConfig({
    SVC_MASTER_KEY: MASTER_KEY,
    // One key per test process: apps sharing a database (replicas) must open each other's sealed data, and no test
    // writes a key file into the working tree's .svc-data.
    SVC_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    LOG_LEVEL: 'info',
    // Every answer with a response schema must serialize exactly as JSON.stringify would (src/api/response-check.ts).
    SVC_CHECK_RESPONSES: 'true',
    ...(testDb.url ? { DATABASE_URL: testDb.url } : {}),
    ...(testDb.directUrl ? { DATABASE_DIRECT_URL: testDb.directUrl } : {}),
    ...(REDIS_URL ? { REDIS_URL, SVC_REDIS_PREFIX: redisPrefix } : {}),
    ...opts.env,
  });
  const logs = new LogCapture();
  const clock = opts.clock ?? new FakeClock();
  const log = pino({ level: 'info', redact: { paths: LOG_REDACT_PATHS, censor: '[redacted]' } }, logs);
  const deps = await createDeps(config, { clock, log, database: testDb.database, webhookWorker: opts.webhookWorker });
  const app = await buildApp(deps);
  await opts.beforeReady?.(app);
  await app.ready();
  return {
    app,
    deps,
    clock,
    logs,
    config,
    close: async () => {
      await app.close();
      // Writes the usage records still queued and stops the outcome consumer (its own Redis connection).
      await deps.outcomes.close();
      deps.redis?.disconnect();
      if (REDIS_URL && !opts.redisPrefix) await deleteRedisPrefix(REDIS_URL, redisPrefix);
      if (ownDb) await ownDb.drop();
    },
  };
}

export interface CallOptions {
  key?: string | null;
  headers?: Record<string, string>;
  query?: Record<string, string | number>;
}

/** A small client over app.inject that speaks JSON and the Bearer key. */
export function client(app: FastifyInstance, defaultKey: string = MASTER_KEY) {
  const call = async (method: InjectOptions['method'], url: string, body?: unknown, opts: CallOptions = {}) => {
    const key = opts.key === undefined ? defaultKey : opts.key;
    const res: LightMyRequestResponse = await app.inject({
      method,
      url,
      query: opts.query as Record<string, string> | undefined,
      headers: {
        ...(key ? { authorization: `Bearer ${key}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...opts.headers,
      },
      payload: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    let json: any = null;
    try {
      json = res.body ? JSON.parse(res.body) : null;
    } catch {
      json = null;
    }
    return { status: res.statusCode, headers: res.headers, body: json, raw: res.body };
  };
  return {
    get: (url: string, opts?: CallOptions) => call('GET', url, undefined, opts),
    post: (url: string, body?: unknown, opts?: CallOptions) => call('POST', url, body, opts),
    put: (url: string, body?: unknown, opts?: CallOptions) => call('PUT', url, body, opts),
    patch: (url: string, body?: unknown, opts?: CallOptions) => call('PATCH', url, body, opts),
    delete: (url: string, opts?: CallOptions) => call('DELETE', url, undefined, opts),
  };
}
export type Client = ReturnType<typeof client>;

export interface Seeded {
  projectId: string;
  keyId: string;
  secret: string;
}

export interface SeedOptions {
  scopes?: string[];
  plan?: string;
  name?: string;
  region?: string;
  /** Set with PUT /v1/projects/{id}/rate-limits before the key is created. */
  limits?: { requests_per_minute: number; tokens_per_minute: number; burst: number };
  /** Set with PUT /v1/projects/{id}/budget before the key is created. */
  budgetUsd?: number;
}

/**
 * The one project seeder: a project (with the given plan, rate limits and budget) and a key in it with the given scopes,
 * created by the operator through the API of an in-process app (`client(app)`) or of a gateway in a child process.
 */
export async function seedProject(api: Client | Pick<GatewayProcess, 'call'>, opts: SeedOptions = {}): Promise<Seeded> {
  const send = async (what: string, method: 'POST' | 'PUT', url: string, body: unknown) => {
    const res =
      'call' in api ? await api.call(method, url, { body }) : method === 'POST' ? await api.post(url, body) : await api.put(url, body);
    if (res.status !== 200) throw new Error(`seed: ${what} failed: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };
  const project = await send('create project', 'POST', '/v1/projects', {
    name: opts.name ?? uniqueName('project'),
    plan: opts.plan,
    region: opts.region,
  });
  if (opts.limits) await send('set rate limits', 'PUT', `/v1/projects/${project.id}/rate-limits`, opts.limits);
  if (opts.budgetUsd !== undefined) await send('set budget', 'PUT', `/v1/projects/${project.id}/budget`, { budget_usd: opts.budgetUsd });
  const key = await send('create key', 'POST', '/v1/keys', {
    project_id: project.id,
    name: uniqueName('key'),
    scopes: opts.scopes ?? ['keys:manage', 'audit:read', 'inference:write', 'governance:manage', 'usage:read'],
  });
  return { projectId: project.id as string, keyId: key.id as string, secret: key.secret as string };
}

export { closeDeps };

/**
 * Swaps one of the root's pieces the request path reads (the provider registry, the response cache) mid-test: on
 * `deps` and on every port holding it (the ports hold the piece itself, not a getter: src/app-deps.ts composePorts).
 * Swap the original back the same way.
 */
export function swapPiece<K extends 'providers' | 'responseCache'>(deps: Deps, name: K, piece: Deps[K]): void {
  const old = deps[name];
  deps[name] = piece;
  for (const port of Object.values(deps.ports) as Record<string, unknown>[]) {
    for (const [field, value] of Object.entries(port)) if (value === old) port[field] = piece;
  }
}
