import { mkdirSync } from 'node:fs';
import type { PGlite } from '@electric-sql/pglite';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { PrismaClient } from '../generated/prisma/client.ts';
import { lockDataDir } from './data-dir-lock.ts';
import { startPgliteMaintenance, type PgliteMaintenance, type PgliteMaintenanceOptions } from './pglite-maintenance.ts';
import { pgDriver, pgliteDriver, type SqlDriver } from './sql.ts';

export type Db = PrismaClient;
/** What a store function runs on: the client or an interactive transaction. */
export type Tx = Omit<PrismaClient, '$connect' | '$disconnect' | '$on' | '$transaction' | '$extends'>;

export interface Database {
  prisma: PrismaClient;
  kind: 'postgres' | 'pglite';
  /** The PostgreSQL schema in use (from `?schema=` in DATABASE_URL), or 'public'. */
  schema: string;
  pglite?: PGlite;
  /** The driver under Prisma (db/sql.ts), for the background writers' batches: the same pool or PGlite instance. */
  sql: SqlDriver;
  /** PGlite only: the checkpoints and ANALYZE its missing background workers would run (db/pglite-maintenance.ts). */
  maintenance?: PgliteMaintenance;
  close(): Promise<void>;
}

export interface OpenOptions {
  /** PostgreSQL URL; null: embedded PGlite. */
  databaseUrl: string | null;
  /** PGlite directory; null: in memory (tests). */
  dataDir: string | null;
  poolSize?: number;
  log?: boolean;
  /** PGlite's maintenance timer (tests make its thresholds small). */
  maintenance?: PgliteMaintenanceOptions;
}

export function schemaOf(databaseUrl: string): string {
  return new URL(databaseUrl).searchParams.get('schema') ?? 'public';
}

/**
 * PostgreSQL settings for the embedded PGlite (issue 36: resident memory). Its WASM heap never shrinks, and PostgreSQL's
 * default 128 MB of shared buffers grew it from 128 MB to about 184 MB and the process's RSS by about 110 MB; the
 * data files stay in the OS page cache either way. maintenance_work_mem (64 MB by default) bounds what one ANALYZE,
 * VACUUM or index build can add to that heap for good.
 */
const PGLITE_SETTINGS = ['-c', 'shared_buffers=16MB', '-c', 'maintenance_work_mem=16MB'];

/** Opens PostgreSQL through @prisma/adapter-pg, or the embedded PGlite through pglite-prisma-adapter. */
export async function openDatabase(opts: OpenOptions): Promise<Database> {
  const log = opts.log ? ([{ emit: 'event', level: 'query' }] as const) : undefined;
  if (opts.databaseUrl) {
    const schema = schemaOf(opts.databaseUrl);
    const url = new URL(opts.databaseUrl);
    url.searchParams.delete('schema');
    // One pool, Prisma's adapter's and the direct batches' (db/sql.ts).
    const pool = new pg.Pool({
      connectionString: url.toString(),
      max: opts.poolSize ?? 10,
      // Raw SQL (locks, SKIP LOCKED claims) must see the same schema as the generated queries.
      options: `-c search_path="${schema}"`,
      connectionTimeoutMillis: 5_000,
    });
    // An idle connection's error (the server restarted) is not the process's: the next checkout connects anew.
    pool.on('error', () => {});
    const adapter = new PrismaPg(pool, { schema, disposeExternalPool: true });
    const prisma = new PrismaClient({ adapter, log: log ? [...log] : undefined });
    return { prisma, kind: 'postgres', schema, sql: pgDriver(pool, { timeoutMs: 30_000 }), close: () => prisma.$disconnect() };
  }
  if (opts.dataDir) mkdirSync(opts.dataDir, { recursive: true });
  // One process at a time on an on-disk PGlite (Studio, the migrate script and the gateway take the same lock):
  // a second opener throws DataDirInUseError before touching the files.
  const lock = opts.dataDir ? lockDataDir(opts.dataDir) : null;
  // Loaded only here: a PostgreSQL deployment never holds PGlite's code (about 3 MB of heap) in memory.
  let pglite: PGlite;
  let PrismaPGlite: typeof import('pglite-prisma-adapter').PrismaPGlite;
  try {
    const [lite, adapter] = await Promise.all([import('@electric-sql/pglite'), import('pglite-prisma-adapter')]);
    PrismaPGlite = adapter.PrismaPGlite;
    const options = { startParams: [...lite.PGlite.defaultStartParams, ...PGLITE_SETTINGS] };
    pglite = opts.dataDir ? new lite.PGlite(opts.dataDir, options) : new lite.PGlite(options);
    await pglite.waitReady;
  } catch (err) {
    lock?.release();
    throw err;
  }
  const prisma = new PrismaClient({ adapter: new PrismaPGlite(pglite), log: log ? [...log] : undefined });
  const maintenance = startPgliteMaintenance(pglite, opts.maintenance);
  return {
    prisma,
    kind: 'pglite',
    schema: 'public',
    pglite,
    sql: pgliteDriver(pglite),
    maintenance,
    close: async () => {
      maintenance.stop();
      try {
        await prisma.$disconnect();
        await pglite.close();
      } finally {
        lock?.release();
      }
    },
  };
}

/** Prisma's unique-constraint violation; v7 adapters carry no target, so callers name the field themselves. */
export function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: string }).code === 'P2002';
}

/**
 * PostgreSQL refuses the NUL character in text (22021) and in jsonb (22P05). The REST hooks refuse it up front
 * (api/hooks/strict-input.ts); this names the database's refusal for whatever reaches it anyway (GraphQL arguments).
 */
export function isNulCharacterError(err: unknown): boolean {
  const cause = (err as { meta?: { driverAdapterError?: { cause?: { originalCode?: string } } } } | null)?.meta?.driverAdapterError?.cause;
  return cause?.originalCode === '22021' || cause?.originalCode === '22P05';
}
