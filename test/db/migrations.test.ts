import { createHash } from 'node:crypto';
import { cpSync, mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyMigrations, migrationStatus, type MigrationTarget } from '../../src/db/migrations.ts';
import { DATABASE_URL, dropSchema, uniqueName, withSchema } from '../helpers/services.ts';

const MIGRATIONS_DIR = fileURLToPath(new URL('../../prisma/migrations/', import.meta.url));
const MIGRATIONS = readdirSync(MIGRATIONS_DIR, { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .map((d) => d.name)
  .sort();
/** Every @@map of prisma/schema.prisma: what the migrations must have created. */
const SCHEMA = readFileSync(new URL('../../prisma/schema.prisma', import.meta.url), 'utf8');
const TABLES = [...SCHEMA.matchAll(/@@map\("([^"]+)"\)/g)].map((m) => m[1]).sort();

const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

interface MigrationRecord {
  migration_name: string;
  checksum: string;
  finished_at: Date | null;
  rolled_back_at: Date | null;
  applied_steps_count: number;
}

/** What `prisma migrate deploy` leaves for each migration: finished, not rolled back, the file's sha256, one step. */
function expectRecordedLikePrisma(records: MigrationRecord[], names: string[], dir = MIGRATIONS_DIR): void {
  expect(records.map((r) => r.migration_name).sort()).toEqual(names);
  for (const r of records) {
    expect(r.checksum).toBe(sha256(path.join(dir, r.migration_name, 'migration.sql')));
    expect(r.finished_at).not.toBeNull();
    expect(r.rolled_back_at).toBeNull();
    expect(r.applied_steps_count).toBe(1);
  }
}

const RECORDS_SQL =
  'SELECT migration_name, checksum, finished_at, rolled_back_at, applied_steps_count FROM "_prisma_migrations"';

it('has a first migration', () => {
  expect(MIGRATIONS.length).toBeGreaterThan(0);
  expect(TABLES.length).toBeGreaterThan(0);
});

describe('PGlite (in memory)', () => {
  let pglite: PGlite;
  let target: MigrationTarget;

  beforeAll(async () => {
    pglite = new PGlite();
    await pglite.waitReady;
    target = { kind: 'pglite', pglite };
  });
  afterAll(() => pglite.close());

  const tables = async () =>
    (
      await pglite.query<{ table_name: string }>(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name",
      )
    ).rows.map((r) => r.table_name);

  it('applies every migration in order and records it as prisma migrate deploy does', async () => {
    const logs: string[] = [];
    const result = await applyMigrations(target, { log: (msg) => logs.push(msg) });

    expect(result.applied).toEqual(MIGRATIONS);
    expect(await tables()).toEqual(expect.arrayContaining([...TABLES, '_prisma_migrations']));
    expectRecordedLikePrisma((await pglite.query<MigrationRecord>(RECORDS_SQL)).rows, MIGRATIONS);
    expect(logs.join('\n')).toContain(MIGRATIONS[0]);
  });

  it('is a no-op on an up-to-date database', async () => {
    const result = await applyMigrations(target);

    expect(result.applied).toEqual([]);
    expect((await pglite.query(RECORDS_SQL)).rows).toHaveLength(MIGRATIONS.length);
  });

  it('reports status: up to date, then pending for a new migration, then drift', async () => {
    const upToDate = await migrationStatus(target);
    expect(upToDate).toMatchObject({ applied: MIGRATIONS, pending: [], failed: [], drift: null, upToDate: true });

    const dir = mkdtempSync(path.join(tmpdir(), 'svc-migrations-'));
    try {
      cpSync(MIGRATIONS_DIR, dir, { recursive: true });
      const extra = '29991231000000_extra';
      mkdirSync(path.join(dir, extra));
      // A ";" inside a literal: the script must reach the database whole, not split on every semicolon.
      const sql = `CREATE TABLE "extra_things" ("id" TEXT PRIMARY KEY, "note" TEXT DEFAULT 'a;b');\n`;
      writeFileSync(path.join(dir, extra, 'migration.sql'), sql);

      const behind = await migrationStatus(target, { migrationsDir: dir });
      expect(behind).toMatchObject({ pending: [extra], drift: null, upToDate: false });

      expect((await applyMigrations(target, { migrationsDir: dir })).applied).toEqual([extra]);
      await pglite.exec(`INSERT INTO "extra_things" ("id") VALUES ('x')`);
      expect((await pglite.query('SELECT "note" FROM "extra_things"')).rows).toEqual([{ note: 'a;b' }]);
      expectRecordedLikePrisma((await pglite.query<MigrationRecord>(RECORDS_SQL)).rows, [...MIGRATIONS, extra], dir);

      await pglite.exec('ALTER TABLE "extra_things" ADD COLUMN "unmigrated" INTEGER');
      const drifted = await migrationStatus(target, { migrationsDir: dir });
      expect(drifted.pending).toEqual([]);
      expect(drifted.upToDate).toBe(false);
      expect(drifted.drift).toContain('extra_things');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    // Each status check replays the migrations into a fresh in-memory PGlite (about 3 s apiece).
  }, 90_000);
});

// A set DATABASE_URL whose server does not answer fails here: the connection error is the test's error.
describe('PostgreSQL', () => {
  it.skipIf(!DATABASE_URL)(
    'two processes starting at once on a fresh schema: both succeed, each migration applied once',
    async () => {
      const schema = uniqueName('mig');
      const url = withSchema(DATABASE_URL!, schema);
      try {
        const [a, b] = await Promise.all([
          applyMigrations({ kind: 'postgres', url }),
          applyMigrations({ kind: 'postgres', url }),
        ]);

        expect([...a.applied, ...b.applied].sort()).toEqual(MIGRATIONS);
        const { records, tables } = await inspectSchema(DATABASE_URL!, schema);
        expectRecordedLikePrisma(records, MIGRATIONS);
        expect(tables).toEqual(expect.arrayContaining([...TABLES, '_prisma_migrations']));

        expect((await applyMigrations({ kind: 'postgres', url })).applied).toEqual([]);
        expect(await migrationStatus({ kind: 'postgres', url })).toMatchObject({
          applied: MIGRATIONS,
          pending: [],
          drift: null,
          upToDate: true,
        });
      } finally {
        await dropSchema(DATABASE_URL!, schema);
      }
    },
  );

  it.skipIf(!DATABASE_URL)('takes the schema from the option as well as from ?schema=', async () => {
    const schema = uniqueName('mig');
    try {
      const result = await applyMigrations({ kind: 'postgres', url: DATABASE_URL!, schema });
      expect(result.applied).toEqual(MIGRATIONS);
      expect((await inspectSchema(DATABASE_URL!, schema)).records).toHaveLength(MIGRATIONS.length);
    } finally {
      await dropSchema(DATABASE_URL!, schema);
    }
  });
});

async function inspectSchema(url: string, schema: string) {
  const u = new URL(url);
  u.searchParams.delete('schema');
  const client = new pg.Client({ connectionString: u.toString() });
  await client.connect();
  try {
    const qualified = RECORDS_SQL.replace('"_prisma_migrations"', `"${schema}"."_prisma_migrations"`);
    const records = (await client.query<MigrationRecord>(qualified)).rows;
    const tables = (
      await client.query<{ table_name: string }>(
        'SELECT table_name FROM information_schema.tables WHERE table_schema = $1',
        [schema],
      )
    ).rows.map((r) => r.table_name);
    return { records, tables };
  } finally {
    await client.end();
  }
}
