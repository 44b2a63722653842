import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { ConfigError } from '../../src/config/environment.ts';
import { newId } from '../../src/db/ids.ts';
import { applyMigrations, createMigration, migrationStatus, type MigrationTarget } from '../../src/db/migrations.ts';
import { enqueueEvent } from '../../src/domain/events/outbox.ts';
import { emitDailyUsageSummaries, SUMMARY_GRACE_MS } from '../../src/jobs/daily-summary/daily-summary.ts';
import { persistOutcomes } from '../../src/jobs/outcomes/persist-outcomes.ts';
import { insertUsageRecords } from '../../src/jobs/outcomes/store.ts';
import { listMonthPartitions } from '../../src/jobs/partition-upkeep/store.ts';
import { stripPartitionResidue } from '../../src/jobs/partition-upkeep/prisma-residue.ts';
import { PARTITIONED_TABLES, type PartitionedTable } from '../../src/jobs/partition-upkeep/tables.ts';
import { runPartitionUpkeep } from '../../src/jobs/partition-upkeep/upkeep.ts';
import { buildTestApp, client, createTestDatabase, seedProject, type TestApp, type TestDatabase } from '../helpers/app.ts';
import { FakeClock } from '../helpers/clock.ts';
import { testOutcome } from '../helpers/outcomes.ts';
import { DATABASE_URL, dropSchema, uniqueName, withSchema } from '../helpers/services.ts';

// Monthly partitions (CONTRACT §18): the upkeep job on an injected clock, the exact dedup of usage request ids across
// months, partition pruning of the usage queries, and the migration from the unpartitioned tables. Runs on the
// embedded PGlite, and on PostgreSQL with DATABASE_URL.

const DAY = 86_400_000;
const MIGRATIONS = path.resolve('prisma/migrations');
const PARTITIONS_MIGRATION = readdirSync(MIGRATIONS).find((d) => d.endsWith('_partitions'))!;
const RETENTION = { usage: 60, events: 30, audit: 45 };
const at = (iso: string) => new Date(iso);
const table = (name: string) => PARTITIONED_TABLES.find((t) => t.name === name)!;

let db: TestDatabase;
let t: TestApp;
const clock = new FakeClock(Date.UTC(2031, 0, 15, 12));
/** Statements the app's Prisma client ran (with their parameters), for EXPLAIN. */
const statements: { query: string; params: string }[] = [];
let projectId: string;
let keyId: string;
let webhookId: string;

beforeAll(async () => {
  db = await createTestDatabase({ log: true });
  (db.database.prisma as unknown as { $on(e: 'query', cb: (q: { query: string; params: string }) => void): void }).$on('query', (q) =>
    statements.push({ query: q.query, params: q.params }),
  );
  t = await buildTestApp({
    database: db,
    clock,
    env: {
      SVC_USAGE_RETENTION_DAYS: String(RETENTION.usage),
      SVC_EVENTS_RETENTION_DAYS: String(RETENTION.events),
      SVC_AUDIT_RETENTION_DAYS: String(RETENTION.audit),
    },
  });
  const operator = client(t.app);
  ({ projectId } = await seedProject(operator));
  const key = await operator.post('/v1/keys', { project_id: projectId, name: uniqueName('k'), scopes: ['inference:write'] });
  keyId = key.body.id;
  // A subscribed webhook (its delivery worker is not started): every event below gets a delivery.
  webhookId = newId('wh');
  await t.deps.db.webhook.create({
    data: { id: webhookId, projectId, url: 'https://hooks.example.com/in', events: ['usage.daily_summary'], secretEncrypted: 'unused', createdAt: new Date(clock.ms) },
  });
}, 60_000);
afterAll(async () => {
  await t?.close();
  await db?.drop();
});

/** The partition holding a row, by name. */
async function partitionOf(tableName: string, where: string, value: string): Promise<string | null> {
  const rows = await t.deps.db.$queryRawUnsafe<{ relname: string }[]>(
    `SELECT c.relname FROM "${tableName}" x JOIN pg_class c ON c.oid = x.tableoid WHERE x."${where}" = $1`,
    value,
  );
  return rows[0]?.relname ?? null;
}

const months = async (tb: PartitionedTable) =>
  (await listMonthPartitions(t.deps.db, tb)).map((m) => new Date(m).toISOString().slice(0, 7));

async function writeUsage(createdAt: Date, requestId?: string): Promise<{ requestId: string; written: boolean }> {
  const o = { ...testOutcome(projectId, keyId, createdAt), ...(requestId ? { requestId } : {}) };
  const fresh = await t.deps.database.sql.transaction((tx) => insertUsageRecords(tx, [o]));
  return { requestId: o.requestId, written: fresh.has(o.requestId) };
}

/** An event with its delivery (the project's webhook) and one attempt, all at `when`; the event id. */
async function writeEvent(when: Date): Promise<{ eventId: string; deliveryId: string; attemptId: string }> {
  const { id: eventId } = await enqueueEvent(t.deps.db, when, projectId, 'usage.daily_summary', { at: when.toISOString() });
  const [d] = await t.deps.db.$queryRaw<{ id: string }[]>`SELECT id FROM webhook_deliveries WHERE event_id = ${eventId}`;
  const attemptId = newId('att', when.getTime());
  await t.deps.db.$executeRaw`INSERT INTO webhook_attempts (id, delivery_id, attempt, attempted_at, response_status, duration_ms)
    VALUES (${attemptId}, ${d!.id}, 1, ${when}, 200, 5)`;
  return { eventId, deliveryId: d!.id, attemptId };
}

async function writeAudit(when: Date): Promise<string> {
  const id = newId('aud', when.getTime());
  await t.deps.db.auditEvent.create({ data: { id, projectId, action: 'key.create', createdAt: when } });
  return id;
}

async function exists(tableName: string, column: string, value: string): Promise<boolean> {
  return (await partitionOf(tableName, column, value)) !== null;
}

describe('the partition upkeep (injected clock)', () => {
  it('keeps the current month and the next two ready, and is a no-op when run again', async () => {
    clock.ms = Date.UTC(2031, 0, 15, 12);
    const first = await runPartitionUpkeep(t.deps);
    for (const tb of PARTITIONED_TABLES) {
      expect(first.created).toEqual(expect.arrayContaining([`${tb.name}_p203101`, `${tb.name}_p203102`, `${tb.name}_p203103`]));
      // The migration's months (the real clock's) are far past retention on this clock: dropped.
      expect(await months(tb)).toEqual(['2031-01', '2031-02', '2031-03']);
    }
    expect(await runPartitionUpkeep(t.deps)).toEqual({ created: [], dropped: [], moved: 0, deleted: 0 });
  });

  it('puts a row of a month without its partition in the default partition, and moves it when the month rolls over', async () => {
    const june = await writeUsage(at('2031-06-10T08:00:00Z'));
    expect(june.written).toBe(true);
    expect(await partitionOf('usage_records', 'request_id', june.requestId)).toBe('usage_records_default');

    clock.ms = Date.UTC(2031, 3, 10); // April: April, May and June are made ready; January is past 60 days
    const r = await runPartitionUpkeep(t.deps);
    expect(r.created).toEqual(expect.arrayContaining(['usage_records_p203104', 'usage_records_p203105', 'usage_records_p203106']));
    expect(r.moved).toBe(1);
    expect(await partitionOf('usage_records', 'request_id', june.requestId)).toBe('usage_records_p203106');
    expect(await months(table('usage_records'))).toEqual(['2031-02', '2031-03', '2031-04', '2031-05', '2031-06']);
    // Events: 30 days. The bound is March 11: February (ends March 1) is gone too.
    expect(await months(table('events'))).toEqual(['2031-03', '2031-04', '2031-05', '2031-06']);
  });

  it('drops a month once its last day is past the retention bound: its rows go, newer months stay', async () => {
    clock.ms = Date.UTC(2032, 0, 10);
    await runPartitionUpkeep(t.deps);
    const jan = {
      usage: await writeUsage(at('2032-01-31T23:59:59.999Z')),
      event: await writeEvent(at('2032-01-20T10:00:00Z')),
      audit: await writeAudit(at('2032-01-20T10:00:00Z')),
    };
    const feb = {
      usage: await writeUsage(at('2032-02-01T00:00:00Z')),
      event: await writeEvent(at('2032-02-01T00:00:00Z')),
      audit: await writeAudit(at('2032-02-01T00:00:00Z')),
    };
    const janEnd = Date.UTC(2032, 1, 1);
    const janHolds = async () => ({
      usage: await exists('usage_records', 'request_id', jan.usage.requestId),
      dedup: (await t.deps.db.usageRequestId.count({ where: { requestId: jan.usage.requestId } })) === 1,
      event: await exists('events', 'id', jan.event.eventId),
      delivery: await exists('webhook_deliveries', 'id', jan.event.deliveryId),
      attempt: await exists('webhook_attempts', 'id', jan.event.attemptId),
      audit: await exists('audit_events', 'id', jan.audit),
    });

    // Events (30 days): January goes at February 1 + 30 days, not a millisecond before.
    clock.ms = janEnd + RETENTION.events * DAY - 1;
    await runPartitionUpkeep(t.deps);
    expect(await janHolds()).toEqual({ usage: true, dedup: true, event: true, delivery: true, attempt: true, audit: true });
    clock.ms = janEnd + RETENTION.events * DAY;
    const events = await runPartitionUpkeep(t.deps);
    expect(events.dropped.sort()).toEqual(['events_p203201', 'webhook_attempts_p203201', 'webhook_deliveries_p203201']);
    expect(await janHolds()).toEqual({ usage: true, dedup: true, event: false, delivery: false, attempt: false, audit: true });

    // Audit (45 days).
    const droppedOf = async (tb: string) => (await runPartitionUpkeep(t.deps)).dropped.filter((n) => n.startsWith(`${tb}_`));
    clock.ms = janEnd + RETENTION.audit * DAY - 1;
    expect(await droppedOf('audit_events')).toEqual([]);
    clock.ms = janEnd + RETENTION.audit * DAY;
    expect(await droppedOf('audit_events')).toEqual(['audit_events_p203201']);
    expect(await janHolds()).toMatchObject({ usage: true, audit: false });

    // Usage (60 days): the records and their request ids in the dedup table.
    clock.ms = janEnd + RETENTION.usage * DAY - 1;
    expect(await droppedOf('usage_records')).toEqual([]);
    clock.ms = janEnd + RETENTION.usage * DAY;
    expect(await droppedOf('usage_records')).toEqual(['usage_records_p203201']);
    expect(await janHolds()).toEqual({ usage: false, dedup: false, event: false, delivery: false, attempt: false, audit: false });

    // February's usage and audit are kept.
    expect(await exists('usage_records', 'request_id', feb.usage.requestId)).toBe(true);
    expect(await exists('audit_events', 'id', feb.audit)).toBe(true);
    expect(await t.deps.db.usageRequestId.count({ where: { requestId: feb.usage.requestId } })).toBe(1);
    // February's events went at March 1 + 30 days (before this clock), with their deliveries and attempts.
    expect(await exists('events', 'id', feb.event.eventId)).toBe(false);
    expect(await exists('webhook_deliveries', 'id', feb.event.deliveryId)).toBe(false);
  });

  it('deletes rows the default partition holds from before the first month kept', async () => {
    // A month long past retention, written straight into the default partition (no partition for it exists).
    const old = await writeUsage(at('2020-05-05T00:00:00Z'));
    expect(old.written).toBe(true);
    expect(await partitionOf('usage_records', 'request_id', old.requestId)).toBe('usage_records_default');
    const r = await runPartitionUpkeep(t.deps);
    expect(r.created).toEqual([]);
    expect(r.deleted).toBe(2); // the row and its request id
    expect(await exists('usage_records', 'request_id', old.requestId)).toBe(false);
  });
});

describe('usage dedup across months', () => {
  it('refuses a duplicate request id in another month (and in the default partition): the writer records it once', async () => {
    const first = testOutcome(projectId, keyId, new Date(clock.ms));
    const ports = { sql: t.deps.database.sql, sealer: t.deps.webhooks.secretBox };
    await persistOutcomes(ports, [first], new Date(clock.ms));
    const nextMonth = { ...first, createdAt: new Date(clock.ms + 35 * DAY), eventId: newId('evt', clock.ms + 35 * DAY) };
    const farAway = { ...first, createdAt: at('2040-01-01T00:00:00Z'), eventId: newId('evt', Date.UTC(2040, 0, 1)) };
    await persistOutcomes(ports, [nextMonth], new Date(clock.ms));
    await persistOutcomes(ports, [farAway], new Date(clock.ms));
    const rows = await t.deps.db.usageRecord.findMany({ where: { requestId: first.requestId } });
    expect(rows.map((r) => r.createdAt.toISOString())).toEqual([first.createdAt.toISOString()]);
    // One inference.completed event: the duplicates wrote nothing else either.
    const events = await t.deps.db.$queryRaw<{ n: number }[]>`
      SELECT count(*)::int AS n FROM events WHERE type = 'inference.completed' AND data->>'request_id' = ${first.requestId}`;
    expect(events[0]!.n).toBe(1);
  });

  it('admits exactly one of two concurrent writes of one request id in different months', async () => {
    const requestId = newId('req');
    const results = await Promise.all([
      writeUsage(new Date(clock.ms), requestId),
      writeUsage(new Date(clock.ms + 40 * DAY), requestId),
    ]);
    expect(results.filter((r) => r.written)).toHaveLength(1);
    expect(await t.deps.db.usageRecord.count({ where: { requestId } })).toBe(1);
  });
});

describe('partition pruning', () => {
  /** The plan of a statement the app ran, with the parameters it ran with. */
  async function plan(match: RegExp): Promise<string> {
    const s = [...statements].reverse().find((x) => match.test(x.query));
    expect(s, `no statement matching ${match}`).toBeDefined();
    const params = JSON.parse(s!.params) as unknown[];
    const rows = await t.deps.db.$queryRawUnsafe<Record<string, string>[]>(`EXPLAIN (COSTS OFF) ${s!.query}`, ...params);
    return rows.map((r) => Object.values(r)[0]).join('\n');
  }
  /** The partitions of usage_records a plan reads. */
  const scanned = (text: string) => [...new Set(text.match(/usage_records_(p\d{6}|default)/g) ?? [])].sort();

  it('the daily summary reads only its day\'s month', async () => {
    const now = clock.ms;
    const dayStart = Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth(), new Date(now).getUTCDate()) - DAY;
    await writeUsage(new Date(dayStart + 3_600_000));
    statements.length = 0;
    expect(await emitDailyUsageSummaries(t.deps, dayStart + DAY + SUMMARY_GRACE_MS)).toBe(1);
    const month = new Date(dayStart).toISOString().slice(0, 7).replace('-', '');
    const text = await plan(/FROM usage_records\s+WHERE created_at >=/);
    console.log(`the daily summary's plan (${t.deps.database.kind}):\n${text}`);
    expect(scanned(text)).toEqual([`usage_records_p${month}`]);
  });

  it('the usage list with dates, and the usage by day, read only the months they cover', async () => {
    const operator = client(t.app);
    const day = new Date(clock.ms).toISOString().slice(0, 10);
    const month = day.slice(0, 7).replace('-', '');
    statements.length = 0;
    const list = await operator.get(`/v1/usage?start_date=${day}&end_date=${day}`);
    expect(list.status).toBe(200);
    const listPlan = await plan(/FROM "?[\w.]*"?\.?"usage_records"[\s\S]*"created_at" >=/);
    console.log(`the usage list's plan (${t.deps.database.kind}):\n${listPlan}`);
    expect(scanned(listPlan)).toEqual([`usage_records_p${month}`]);
    statements.length = 0;
    const byDay = await operator.get(`/v1/usage?granularity=day&start_date=${day}&end_date=${day}`);
    expect(byDay.status).toBe(200);
    expect(scanned(await plan(/FROM usage_records\s+WHERE created_at >=/))).toEqual([`usage_records_p${month}`]);
  });

  it('a query without the partition key reads every partition (the contrast)', async () => {
    const rows = await t.deps.db.$queryRawUnsafe<Record<string, string>[]>(
      `EXPLAIN (COSTS OFF) SELECT count(*) FROM usage_records WHERE project_id = $1`,
      projectId,
    );
    const text = rows.map((r) => Object.values(r)[0]).join('\n');
    expect(scanned(text).length).toBeGreaterThan(2);
  });
});

describe('the schema', () => {
  it('shows no drift after the upkeep created and dropped partitions', { timeout: 120_000 }, async () => {
    // The migration engine on the direct URL (npm run test:pgbouncer: PgBouncer refuses its `options` parameter).
    const url = db.directUrl ?? db.url;
    const target: MigrationTarget = url ? { kind: 'postgres', url } : { kind: 'pglite', pglite: db.database.pglite! };
    const status = await migrationStatus(target);
    expect(status).toMatchObject({ pending: [], failed: [], drift: null, upToDate: true });
  });

  it('db:migrate:create finds no change: the partitioned keys are the only difference, and are left out', { timeout: 120_000 }, async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-mig-'));
    try {
      cpSync(MIGRATIONS, dir, { recursive: true });
      const created = await createMigration('probe', { migrationsDir: dir, log: () => {} });
      expect(created).not.toBeNull();
      const { sql, removed } = stripPartitionResidue(readFileSync(created!.file, 'utf8'));
      expect(sql).toBeNull();
      expect(removed).toHaveLength(12); // 5 primary keys (drop + add) and 2 foreign keys
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('keeps a real change to a partitioned table when it strips the residue', () => {
    const sql = [
      '-- AlterTable',
      'ALTER TABLE "usage_records" DROP CONSTRAINT "usage_records_pkey",',
      'ADD COLUMN     "customer" TEXT,',
      'ADD CONSTRAINT "usage_records_pkey" PRIMARY KEY ("request_id");',
      '',
      '-- AddForeignKey',
      'ALTER TABLE "webhook_attempts" ADD CONSTRAINT "webhook_attempts_delivery_id_fkey" FOREIGN KEY ("delivery_id") REFERENCES "webhook_deliveries"("id") ON DELETE RESTRICT ON UPDATE CASCADE;',
      '',
      '-- CreateIndex',
      'CREATE INDEX "x_idx" ON "x"("a");',
      '',
    ].join('\n');
    expect(stripPartitionResidue(sql).sql).toBe(
      '-- AlterTable\nALTER TABLE "usage_records" ADD COLUMN     "customer" TEXT;\n\n-- CreateIndex\nCREATE INDEX "x_idx" ON "x"("a");\n',
    );
  });
});

describe('retention configuration', () => {
  it('defaults to 400, 30 and 400 days, and refuses a value that is not a whole number of days from 1', () => {
    expect(loadConfig({})).toMatchObject({ usageRetentionDays: 400, eventsRetentionDays: 30, auditRetentionDays: 400 });
    expect(loadConfig({ SVC_EVENTS_RETENTION_DAYS: '7' }).eventsRetentionDays).toBe(7);
    for (const [variable, value] of [
      ['SVC_USAGE_RETENTION_DAYS', '0'],
      ['SVC_EVENTS_RETENTION_DAYS', '1.5'],
      ['SVC_AUDIT_RETENTION_DAYS', 'forever'],
      ['SVC_AUDIT_RETENTION_DAYS', '36501'],
    ]) {
      expect(() => loadConfig({ [variable!]: value! }), `${variable}=${value}`).toThrow(
        expect.objectContaining({ constructor: ConfigError, variable }),
      );
    }
    // Events are kept at least as long as a delivery may retry.
    expect(() => loadConfig({ SVC_EVENTS_RETENTION_DAYS: '1', SVC_WEBHOOK_RETRY_HORIZON_S: '172800' })).toThrow(
      /SVC_WEBHOOK_RETRY_HORIZON_S \(172800 s\)/,
    );
    expect(loadConfig({ SVC_EVENTS_RETENTION_DAYS: '2', SVC_WEBHOOK_RETRY_HORIZON_S: '172800' }).eventsRetentionDays).toBe(2);
  });
});

describe('the partitions migration', () => {
  it('converts populated unpartitioned tables without losing a row', { timeout: 120_000 }, async () => {
    const before = mkdtempSync(path.join(tmpdir(), 'svc-mig-'));
    let target: MigrationTarget;
    let query: (sql: string, params?: unknown[]) => Promise<Record<string, unknown>[]>;
    let close: () => Promise<void>;
    let pgClient: pg.Client | null = null;
    const schema = uniqueName('partmig');
    if (DATABASE_URL) {
      const url = withSchema(DATABASE_URL, schema);
      target = { kind: 'postgres', url };
      await applyMigrationsBefore(target, before);
      pgClient = new pg.Client({ connectionString: DATABASE_URL, options: `-c search_path=${schema}` });
      await pgClient.connect();
      query = async (sql, params) => (await pgClient!.query(sql, params)).rows;
      close = async () => {
        await pgClient!.end();
        await dropSchema(DATABASE_URL!, schema);
      };
    } else {
      const pglite = new PGlite();
      target = { kind: 'pglite', pglite };
      await applyMigrationsBefore(target, before);
      query = async (sql, params) => (await pglite.query<Record<string, unknown>>(sql, params)).rows;
      close = () => pglite.close();
    }
    try {
      expect(await query(`SELECT relkind FROM pg_class WHERE oid = to_regclass('usage_records')`)).toEqual([{ relkind: 'r' }]);
      // Rows over several months and years, on both sides of a month's last instant (UTC).
      await query(`INSERT INTO projects (id, name, created_at) VALUES ('prj_m', 'm', now())`);
      await query(`INSERT INTO webhooks (id, project_id, url, events, secret_encrypted, created_at)
                   VALUES ('wh_m', 'prj_m', 'https://x.example', '{usage.daily_summary}', 's', now())`);
      const times = `(SELECT ts FROM unnest(ARRAY[
          '2019-12-31T23:59:59.999Z', '2020-01-01T00:00:00Z', '2024-02-29T12:00:00Z', '2025-07-31T23:30:00Z',
          now()::text]::timestamptz[]) AS ts)`;
      await query(`INSERT INTO usage_records (request_id, project_id, key_id, model, status, cost_micros, created_at, template_version)
                   SELECT 'req_' || i || '_' || (extract(epoch FROM ts) * 1000)::bigint, 'prj_m', 'key_m', 'm', 'succeeded', i, ts, NULLIF(i % 3, 0)
                     FROM ${times} t, generate_series(1, 40) i`);
      await query(`INSERT INTO events (id, project_id, type, data, created_at)
                   SELECT 'evt_' || i || '_' || (extract(epoch FROM ts) * 1000)::bigint, 'prj_m', 'usage.daily_summary', jsonb_build_object('i', i), ts
                     FROM ${times} t, generate_series(1, 10) i`);
      await query(`INSERT INTO webhook_deliveries (id, webhook_id, event_id, project_id, event_type, status, created_at)
                   SELECT 'del_' || substr(id, 5), 'wh_m', id, project_id, type, 'succeeded', created_at FROM events`);
      await query(`INSERT INTO webhook_attempts (id, delivery_id, attempt, attempted_at, response_status, duration_ms)
                   SELECT 'att_' || substr(id, 5), id, 1, created_at + interval '1 second', 200, 3 FROM webhook_deliveries`);
      await query(`INSERT INTO audit_events (id, project_id, action, data, created_at)
                   SELECT 'aud_' || i || '_' || (extract(epoch FROM ts) * 1000)::bigint, CASE WHEN i % 2 = 0 THEN 'prj_m' END, 'key.create', '{}', ts
                     FROM ${times} t, generate_series(1, 10) i`);
      // Over the columns the tables have before the conversion: later migrations may add columns (with their defaults).
      const columns = new Map<string, string>();
      for (const tb of PARTITIONED_TABLES) {
        const cols = await query(
          `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`,
          [tb.name],
        );
        columns.set(tb.name, cols.map((c) => `x."${String(c.column_name)}"`).join(', '));
      }
      const fingerprint = async () => {
        const out: Record<string, unknown> = {};
        for (const tb of PARTITIONED_TABLES) {
          const key = tb.name === 'usage_records' ? 'request_id' : 'id';
          const [row] = await query(
            `SELECT count(*)::int AS n, md5(string_agg(row(${columns.get(tb.name)})::text, '|' ORDER BY x.${key})) AS digest FROM ${tb.name} x`,
          );
          out[tb.name] = row;
        }
        return out;
      };
      const old = await fingerprint();
      expect(old).toMatchObject({ usage_records: { n: 200 }, events: { n: 50 }, webhook_deliveries: { n: 50 }, webhook_attempts: { n: 50 }, audit_events: { n: 50 } });

      const { applied } = await applyMigrations(target);
      expect(applied).toContain(PARTITIONS_MIGRATION);

      expect(await fingerprint()).toEqual(old);
      const thisMonth = new Date().toISOString().slice(0, 7).replace('-', '');
      for (const tb of PARTITIONED_TABLES) {
        expect(await query(`SELECT relkind FROM pg_class WHERE oid = to_regclass('${tb.name}')`)).toEqual([{ relkind: 'p' }]);
        const parts = (await query(`SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                                     WHERE i.inhparent = to_regclass('${tb.name}') ORDER BY 1`)).map((r) => r.relname);
        // (Attempts come a second after their delivery: none is left in December 2019.)
        const withRows = tb.name === 'webhook_attempts' ? ['202001', '202402', '202507'] : ['201912', '202001', '202402', '202507'];
        expect(parts).toEqual(expect.arrayContaining([...withRows, thisMonth].map((m) => `${tb.name}_p${m}`).concat(`${tb.name}_default`)));
        expect(await query(`SELECT count(*)::int AS n FROM ${tb.name}_default`)).toEqual([{ n: 0 }]);
      }
      // The last millisecond of 2019 (UTC) stayed in December, the first of 2020 is in January.
      expect(await query(`SELECT count(*)::int AS n FROM usage_records_p201912`)).toEqual([{ n: 40 }]);
      expect(await query(`SELECT count(*)::int AS n FROM usage_records_p202001`)).toEqual([{ n: 40 }]);
      // Every request id is in the dedup table, and a duplicate in another month is skipped.
      expect(await query(`SELECT count(*)::int AS n FROM usage_request_ids`)).toEqual([{ n: 200 }]);
      const dup = await query(`INSERT INTO usage_records (request_id, project_id, key_id, model, status, created_at)
        SELECT request_id, project_id, key_id, model, status, created_at + interval '45 days' FROM usage_records
         WHERE created_at < '2020-02-01' RETURNING request_id`);
      expect(dup).toEqual([]);
      expect(await migrationStatus(target)).toMatchObject({ drift: null, upToDate: true });
    } finally {
      await close();
      rmSync(before, { recursive: true, force: true });
    }
  });
});

/** Applies the migrations older than the partitions migration (the old shape). */
async function applyMigrationsBefore(target: MigrationTarget, dir: string): Promise<void> {
  for (const entry of readdirSync(MIGRATIONS, { withFileTypes: true })) {
    if (entry.isDirectory() && entry.name >= PARTITIONS_MIGRATION) continue;
    cpSync(path.join(MIGRATIONS, entry.name), path.join(dir, entry.name), { recursive: true });
  }
  await applyMigrations(target, { migrationsDir: dir });
}
