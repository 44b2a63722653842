/**
 * node --import tsx scripts/db-migrate.ts create NAME | deploy | status
 *
 * Stands in for `prisma migrate dev --create-only` / `deploy` / `status`, whose native engine cannot be downloaded
 * here (see src/db/migrations.ts). The database is DATABASE_DIRECT_URL or DATABASE_URL (PostgreSQL, `?schema=` honoured) or, when unset,
 * the embedded PGlite in SVC_DATA_DIR (default ./.svc-data).
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { DataDirInUseError, lockDataDir } from '../src/db/data-dir-lock.ts';
import {
  applyMigrations,
  createMigration,
  migrationStatus,
  type MigrationStatus,
  type MigrationTarget,
} from '../src/db/migrations.ts';
import { stripPartitionResidue } from '../src/jobs/partition-upkeep/prisma-residue.ts';

const USAGE = 'usage: node --import tsx scripts/db-migrate.ts create NAME | deploy | status';

interface OpenTarget {
  target: MigrationTarget;
  label: string;
  close(): Promise<void>;
}

async function openTarget(): Promise<OpenTarget> {
  // Migrations take a session advisory lock: through DATABASE_DIRECT_URL when DATABASE_URL is a PgBouncer.
  const url = directUrl(process.env.DATABASE_URL, process.env.DATABASE_DIRECT_URL);
  if (url) return { target: { kind: 'postgres', url }, label: redact(url), close: async () => {} };
  const dir = process.env.SVC_DATA_DIR || './.svc-data';
  mkdirSync(dir, { recursive: true });
  // The gateway or Studio on the same directory: refused (DataDirInUseError), before PGlite opens it.
  const lock = lockDataDir(dir);
  const pglite = new PGlite(dir);
  try {
    await pglite.waitReady;
  } catch (err) {
    lock.release();
    throw err;
  }
  const close = async () => {
    try {
      await pglite.close();
    } finally {
      lock.release();
    }
  };
  return { target: { kind: 'pglite', pglite }, label: `PGlite ${dir}`, close };
}

/** DATABASE_DIRECT_URL (with DATABASE_URL's `?schema=` when it names none), else DATABASE_URL. */
function directUrl(main: string | undefined, direct: string | undefined): string | undefined {
  if (!main || !direct) return main || undefined;
  const u = new URL(direct);
  const schema = new URL(main).searchParams.get('schema');
  if (schema !== null && !u.searchParams.has('schema')) u.searchParams.set('schema', schema);
  return u.toString();
}

function redact(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = '***';
  return u.toString();
}

async function withTarget<T>(fn: (open: OpenTarget) => Promise<T>): Promise<T> {
  const open = await openTarget();
  try {
    return await fn(open);
  } finally {
    await open.close();
  }
}

function printStatus(status: MigrationStatus): void {
  const list = (title: string, names: string[]) => {
    if (names.length) console.log(`${title}:\n${names.map((n) => `  ${n}`).join('\n')}`);
  };
  console.log(`${status.applied.length} migration(s) applied`);
  list('Not yet applied', status.pending);
  list('Failed (resolve before deploying)', status.failed);
  list('Edited after being applied', status.edited);
  list('Applied but missing from prisma/migrations', status.missingFromDirectory);
  if (status.drift) console.log(`Drift: the database differs from its applied migrations:\n${status.drift}`);
  console.log(status.upToDate ? 'Database schema is up to date.' : 'Database schema is NOT up to date.');
}

async function main(argv: string[]): Promise<number> {
  const [command, name] = argv;
  switch (command) {
    case 'create': {
      if (!name) throw new Error(`a migration name is required\n${USAGE}`);
      const created = await createMigration(name, { log: () => {} });
      if (!created) {
        console.log('no changes: the schema matches the migrations');
        return 0;
      }
      // The partitioned tables' keys and dropped foreign keys, which schema.prisma cannot express, are not changes.
      const { sql, removed } = stripPartitionResidue(readFileSync(created.file, 'utf8'));
      if (removed.length) console.log(`left out ${removed.length} clauses on the partitioned tables' keys (src/jobs/partition-upkeep/prisma-residue.ts)`);
      if (sql === null) {
        rmSync(path.dirname(created.file), { recursive: true });
        console.log('no changes: the schema matches the migrations');
        return 0;
      }
      writeFileSync(created.file, sql);
      console.log(`created ${path.relative(process.cwd(), created.file)}`);
      return 0;
    }
    case 'deploy':
      return withTarget(async ({ target, label }) => {
        console.log(`Database: ${label}`);
        const { applied } = await applyMigrations(target, { log: (msg) => console.log(msg) });
        if (applied.length === 0) console.log('No pending migrations to apply.');
        return 0;
      });
    case 'status':
      return withTarget(async ({ target, label }) => {
        console.log(`Database: ${label}`);
        const status = await migrationStatus(target);
        printStatus(status);
        // Like `prisma migrate status`: non-zero when the database needs attention, so CI can gate on it.
        return status.upToDate ? 0 : 1;
      });
    default:
      console.error(USAGE);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(err instanceof DataDirInUseError ? `migrate: ${err.message}` : err instanceof Error ? err.message : err);
    process.exitCode = 1;
  },
);
