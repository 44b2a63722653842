import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/api/app.ts';
import { closeDeps, createDeps, LOG_REDACT_PATHS } from '../../src/app-deps.ts';
import { loadConfig } from '../../src/config/config.ts';
import { ConfigError } from '../../src/config/environment.ts';
import type { Deps } from '../../src/deps.ts';
import { client, LogCapture, MASTER_KEY, seedProject, TEST_ENCRYPTION_KEY, type Client } from '../helpers/app.ts';
import { FakeClock } from '../helpers/clock.ts';
import { startReceiver, testPki, type Receiver } from '../helpers/https-receiver.ts';
import { createSchemaRole, pooledUrl, startPgBouncer, type PgBouncer } from '../helpers/pgbouncer.ts';
import { DATABASE_URL, dropSchema, uniqueName, withSchema } from '../helpers/services.ts';
import { user } from '../inference/fixtures.ts';
import { createWebhook, emitKeyRotated } from '../webhooks/support.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const MIGRATIONS = readdirSync(path.join(ROOT, 'prisma', 'migrations'), { withFileTypes: true }).filter((d) => d.isDirectory()).length;
// CI=1 runs with DATABASE_URL (.ci/run) and Debian's pgbouncer: there this never skips.
const needsPostgres = !DATABASE_URL && process.env.CI !== '1';

describe('DATABASE_DIRECT_URL, DATABASE_READ_URL and DATABASE_POOL_SIZE (configuration)', () => {
  const fails = (env: Record<string, string>, variable: string, words: RegExp) => {
    let err: unknown;
    try {
      loadConfig(env);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).variable).toBe(variable);
    expect((err as Error).message).toMatch(words);
  };

  it('refuses a direct or read URL without DATABASE_URL, of another scheme, or naming another schema', () => {
    fails({ DATABASE_DIRECT_URL: 'postgresql://db/x' }, 'DATABASE_DIRECT_URL', /needs DATABASE_URL/);
    fails({ DATABASE_READ_URL: 'postgresql://db/x' }, 'DATABASE_READ_URL', /needs DATABASE_URL/);
    fails({ DATABASE_URL: 'postgresql://db/x', DATABASE_DIRECT_URL: 'mysql://db/x' }, 'DATABASE_DIRECT_URL', /must start with postgresql:\/\//);
    fails(
      { DATABASE_URL: 'postgresql://bouncer/x?schema=a', DATABASE_DIRECT_URL: 'postgresql://db/x?schema=b' },
      'DATABASE_DIRECT_URL',
      /names schema b but DATABASE_URL names a/,
    );
    fails({ DATABASE_URL: 'postgresql://db/x', DATABASE_READ_URL: 'postgresql://replica/x?schema=b' }, 'DATABASE_READ_URL', /names none \(public\)/);
    fails({ DATABASE_URL: 'postgresql://db/x', DATABASE_POOL_SIZE: '0' }, 'DATABASE_POOL_SIZE', /between 1 and 1000/);
    fails({ DATABASE_URL: 'postgresql://db/x', DATABASE_POOL_SIZE: 'ten' }, 'DATABASE_POOL_SIZE', /whole number/);
  });

  it("takes DATABASE_URL's schema for the direct and read URLs that name none; the pool has 10 connections unless told", () => {
    const c = loadConfig({
      DATABASE_URL: 'postgresql://bouncer:6432/app?schema=gw',
      DATABASE_DIRECT_URL: 'postgresql://db:5432/app',
      DATABASE_READ_URL: 'postgresql://replica:5432/app?schema=gw',
    });
    expect(new URL(c.databaseDirectUrl!).searchParams.get('schema')).toBe('gw');
    expect(c.databaseReadUrl).toBe('postgresql://replica:5432/app?schema=gw');
    expect(c.databasePoolSize).toBe(10);
    expect(loadConfig({ DATABASE_URL: 'postgresql://db/x', DATABASE_POOL_SIZE: '4' }).databasePoolSize).toBe(4);
    expect(loadConfig({ DATABASE_URL: 'postgresql://db/x' })).toMatchObject({ databaseDirectUrl: null, databaseReadUrl: null });
  });
});

describe.skipIf(needsPostgres)('the gateway with DATABASE_URL through PgBouncer 1.18 (transaction pooling) and DATABASE_DIRECT_URL direct', () => {
  let bouncer: PgBouncer;
  let schema: string;
  let deps: Deps;
  let app: Awaited<ReturnType<typeof buildApp>>;
  let operator: Client;
  const receivers: Receiver[] = [];
  const logs = new LogCapture();

  beforeAll(async () => {
    const server = new URL(DATABASE_URL!);
    // Two server connections per role: the gateway's pool of 3 shares them, statement by statement.
    bouncer = await startPgBouncer({ target: { host: server.hostname, port: Number(server.port || 5432) }, poolSize: 2 });
    schema = uniqueName('pgb');
    await createSchemaRole(DATABASE_URL!, schema);
    const config = loadConfig({
      SVC_MASTER_KEY: MASTER_KEY,
      SVC_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      SVC_EGRESS_ALLOWLIST: '127.0.0.1',
      SVC_CHECK_RESPONSES: 'true',
      DATABASE_URL: pooledUrl(bouncer.url, schema),
      DATABASE_DIRECT_URL: DATABASE_URL!,
      DATABASE_POOL_SIZE: '3',
      // The primary itself (through the pooler) as the "replica": never in recovery, so always current; the reads
      // take its pool.
      DATABASE_READ_URL: pooledUrl(bouncer.url, schema),
    });
    const log = pino({ level: 'info', redact: { paths: LOG_REDACT_PATHS, censor: '[redacted]' } }, logs);
    // The real start: migrations (on the direct connection) included.
    deps = await createDeps(config, { clock: new FakeClock(), log, webhookWorker: { ca: testPki().caCert, pollIntervalMs: 60_000 } });
    app = await buildApp(deps);
    await app.ready();
    operator = client(app);
  });
  afterAll(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await app?.close();
    if (deps) await closeDeps(deps);
    await bouncer?.stop();
    if (schema) await dropSchema(DATABASE_URL!, schema);
  });

  it('migrated the schema on the direct connection, and serves through the pooler as the schema role', async () => {
    const c = new pg.Client({ connectionString: DATABASE_URL! });
    await c.connect();
    try {
      const { rows } = await c.query(`SELECT count(*)::int AS n FROM "${schema}"._prisma_migrations WHERE finished_at IS NOT NULL`);
      expect(rows[0].n).toBe(MIGRATIONS);
    } finally {
      await c.end();
    }
    expect(deps.database.pooled).toBe(true);
    const [row] = await deps.database.sql.$queryRaw<{ schema: string; user: string }[]>`SELECT current_schema() AS schema, current_user AS user`;
    expect(row).toEqual({ schema, user: schema });
  });

  it('creates, reads, rotates and revokes keys', async () => {
    const seeded = await seedProject(operator);
    const got = await operator.get(`/v1/keys/${seeded.keyId}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ id: seeded.keyId, project_id: seeded.projectId });
    const rotated = await operator.post(`/v1/keys/${seeded.keyId}/rotate`, {});
    expect(rotated.status).toBe(200);
    const revoked = await operator.post(`/v1/keys/${seeded.keyId}/revoke`, {});
    expect(revoked.status).toBe(200);
    expect(revoked.body.status).toBe('revoked');
  });

  it('answers inferences under concurrency, each with its usage record, within a pool of 3 client connections', async () => {
    const seeded = await seedProject(operator);
    const api = client(app, seeded.secret);
    const answers = await Promise.all(
      Array.from({ length: 24 }, (_, i) => api.post('/v1/inference', { model: 'mock-1', project_id: seeded.projectId, messages: user(`hello ${i}`) })),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(24).fill(200));
    const usage = await api.get('/v1/usage', { query: { project_id: seeded.projectId, limit: 100 } });
    expect(usage.status).toBe(200);
    expect(usage.body.data.map((u: { request_id: string }) => u.request_id).sort()).toEqual(answers.map((a) => a.body.request_id).sort());
    // DATABASE_POOL_SIZE=3: the gateway never holds more than 3 connections to the pooler.
    const clients = (await bouncer.admin('SHOW CLIENTS')).filter((c) => c.user === schema);
    expect(clients.length).toBeGreaterThan(0);
    expect(clients.length).toBeLessThanOrEqual(3);
    // The pooler did carry the transactions.
    const stats = await bouncer.admin('SHOW STATS');
    expect(Number(stats.find((s) => s.database === 'postgres')?.total_xact_count)).toBeGreaterThan(24);
  });

  it('replays an Idempotency-Key: the provider is asked once, one usage record', async () => {
    const seeded = await seedProject(operator);
    const api = client(app, seeded.secret);
    const body = { model: 'mock-1', project_id: seeded.projectId, messages: user('once only') };
    const headers = { 'idempotency-key': uniqueName('idem') };
    const first = await api.post('/v1/inference', body, { headers });
    const again = await api.post('/v1/inference', body, { headers });
    expect(first.status).toBe(200);
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.id).toBe(first.body.id);
    const usage = await api.get('/v1/usage', { query: { project_id: seeded.projectId } });
    expect(usage.body.data).toHaveLength(1);
  });

  it('wakes the delivery worker by LISTEN on the direct session: delivered without its (one-minute) poll', async () => {
    const r = await startReceiver();
    receivers.push(r);
    const seeded = await seedProject(operator);
    const webhook = await createWebhook(operator, { project_id: seeded.projectId, url: r.url, events: ['key.rotated'] });
    r.secret = webhook.secret;
    await deps.webhooks.worker.start();
    // The worker advertises its direct session (not a pooler connection) for the notifier to pick.
    const c = new pg.Client({ connectionString: DATABASE_URL! });
    await c.connect();
    try {
      const { rows } = await c.query('SELECT application_name, client_port FROM pg_stat_activity WHERE pid = $1', [deps.database.direct!.pid]);
      expect(rows[0].application_name).toMatch(/^svc-deliveries:/);
    } finally {
      await c.end();
    }
    for (let i = 0; i < 3; i++) {
      await emitKeyRotated(operator, seeded.keyId);
      const receipts = await r.waitFor(i + 1, 5_000);
      expect(receipts[i]!.verifyError).toBeNull();
    }
  });

  it('serves usage lists from the read replica once it has caught up (and GraphQL audit lists)', async () => {
    const seeded = await seedProject(operator);
    const api = client(app, seeded.secret);
    const before = { ...deps.database.reads.counts };
    const inf = await api.post('/v1/inference', { model: 'mock-1', project_id: seeded.projectId, messages: user('replica') });
    const usage = await api.get('/v1/usage', { query: { project_id: seeded.projectId } });
    expect(usage.body.data.map((u: { request_id: string }) => u.request_id)).toEqual([inf.body.request_id]);
    const audit = await api.post('/graphql', { query: `{ auditEvents(projectId: "${seeded.projectId}", first: 10) { edges { node { action } } } }` });
    expect(audit.status).toBe(200);
    expect(audit.body.data.auditEvents.edges.map((e: { node: { action: string } }) => e.node.action)).toContain('key.create');
    expect(deps.database.reads.counts.replica).toBe(before.replica + 2);
  });

  it('refuses to start when the role behind the pooler does not find the schema, naming DATABASE_URL', async () => {
    // As postgres (search_path "$user", public): raw SQL would run in public, not in the schema.
    const config = loadConfig({
      SVC_MASTER_KEY: MASTER_KEY,
      SVC_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      DATABASE_URL: withSchema(bouncer.url, schema),
      DATABASE_DIRECT_URL: DATABASE_URL!,
    });
    await expect(createDeps(config, { log: pino({ level: 'silent' }) })).rejects.toThrow(
      new RegExp(`^DATABASE_URL: .*search_path finds schema public, not ${schema}; set the role's search_path`),
    );
    // The same for the read replica's connections.
    const withReplica = loadConfig({
      SVC_MASTER_KEY: MASTER_KEY,
      SVC_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      DATABASE_URL: pooledUrl(bouncer.url, schema),
      DATABASE_DIRECT_URL: DATABASE_URL!,
      DATABASE_READ_URL: withSchema(bouncer.url, schema),
    });
    await expect(createDeps(withReplica, { log: pino({ level: 'silent' }) })).rejects.toThrow(
      new RegExp(`^DATABASE_READ_URL: .*search_path finds schema public, not ${schema}`),
    );
  });

  it('sends reads to the primary while the replica does not answer', async () => {
    const config = loadConfig({
      SVC_MASTER_KEY: MASTER_KEY,
      SVC_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      DATABASE_URL: pooledUrl(bouncer.url, schema),
      DATABASE_DIRECT_URL: DATABASE_URL!,
      DATABASE_READ_URL: 'postgresql://postgres@127.0.0.1:1/postgres',
    });
    const other = await createDeps(config, { log: pino({ level: 'silent' }), clock: new FakeClock() });
    const otherApp = await buildApp(other);
    try {
      const res = await client(otherApp).get('/v1/usage');
      expect(res.status).toBe(200);
      expect(other.database.reads.counts).toEqual({ replica: 0, primary: 1 });
    } finally {
      await otherApp.close();
      await closeDeps(other);
    }
  });
});
