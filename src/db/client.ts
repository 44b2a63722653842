import { mkdirSync } from 'node:fs';
import type { PGlite } from '@electric-sql/pglite';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { PrismaClient } from '../generated/prisma/client.ts';
import { lockDataDir } from './data-dir-lock.ts';
import { DirectSession } from './direct-session.ts';
import { AdvisoryLeadership, soleLeader, type Leadership } from './leadership.ts';
import { primaryReads, replicaReads, type LaggingReads } from './read-replica.ts';
import { initializeInChild, isInitialized, PGLITE_SETTINGS } from './pglite-init.ts';
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
  /**
   * PostgreSQL: where migrations, LISTEN and advisory locks connect (DATABASE_DIRECT_URL, else DATABASE_URL), with
   * `?schema=`; PGlite: null.
   */
  directUrl: string | null;
  /** DATABASE_URL is a transaction-pooling PgBouncer (DATABASE_DIRECT_URL is set): its connections carry no session state. */
  pooled: boolean;
  /** PostgreSQL: the process's one session-mode connection on `directUrl` (LISTEN, advisory locks), opened on first use. */
  direct: DirectSession | null;
  /** Which process runs each background sweep: advisory locks on `direct`; PGlite: this process. */
  leadership: Leadership;
  /** Reads that may lag (usage and audit lists): the read replica once it has caught up, else the primary. */
  reads: LaggingReads<Tx>;
  /** The read replica's driver (DATABASE_READ_URL), or null. */
  readSql: SqlDriver | null;
  close(): Promise<void>;
}

export interface OpenOptions {
  /** PostgreSQL URL; null: embedded PGlite. */
  databaseUrl: string | null;
  /** PGlite directory; null: in memory (tests). */
  dataDir: string | null;
  /** DATABASE_DIRECT_URL: set, DATABASE_URL is taken for a transaction-pooling PgBouncer. */
  directUrl?: string | null;
  /** DATABASE_READ_URL: a streaming replica (or the primary itself) for reads that may lag. */
  readUrl?: string | null;
  /** Connections of DATABASE_URL's pool (and of DATABASE_READ_URL's); default 10. */
  poolSize?: number;
  log?: boolean;
  /** Where the direct session reports a lost connection. */
  warn?: (obj: object, msg: string) => void;
  /** Hears the creation of a new embedded database (the migrations applied). */
  info?: (msg: string) => void;
  /** PGlite's maintenance timer (tests make its thresholds small). */
  maintenance?: PgliteMaintenanceOptions;
}

export function schemaOf(databaseUrl: string): string {
  return new URL(databaseUrl).searchParams.get('schema') ?? 'public';
}

/** Opens PostgreSQL through @prisma/adapter-pg, or the embedded PGlite through pglite-prisma-adapter. */
export async function openDatabase(opts: OpenOptions): Promise<Database> {
  const log = opts.log ? ([{ emit: 'event', level: 'query' }] as const) : undefined;
  if (opts.databaseUrl) {
    const schema = schemaOf(opts.databaseUrl);
    const pooled = Boolean(opts.directUrl);
    const primary = openPool(opts.databaseUrl, schema, pooled, opts.poolSize ?? 10, log);
    const replica = opts.readUrl ? openPool(opts.readUrl, schema, pooled, opts.poolSize ?? 10, undefined) : null;
    const directUrl = opts.directUrl || opts.databaseUrl;
    const direct = new DirectSession(directUrl, { warn: opts.warn ?? (() => {}) });
    return {
      prisma: primary.prisma,
      kind: 'postgres',
      schema,
      sql: primary.sql,
      directUrl,
      pooled,
      direct,
      leadership: new AdvisoryLeadership(direct, schema),
      readSql: replica?.sql ?? null,
      reads: replica ? replicaReads({ client: primary.prisma, sql: primary.sql }, { client: replica.prisma, sql: replica.sql }) : primaryReads(primary.prisma),
      close: async () => {
        await direct.close();
        await replica?.prisma.$disconnect();
        await primary.prisma.$disconnect();
      },
    };
  }
  if (opts.dataDir) mkdirSync(opts.dataDir, { recursive: true });
  // One process at a time on an on-disk PGlite (Studio, the migrate script and the gateway take the same lock):
  // a second opener throws DataDirInUseError before touching the files.
  const lock = opts.dataDir ? lockDataDir(opts.dataDir) : null;
  // Loaded only here: a PostgreSQL deployment never holds PGlite's code (about 3 MB of heap) in memory.
  let pglite: PGlite;
  let PrismaPGlite: typeof import('pglite-prisma-adapter').PrismaPGlite;
  try {
    // A new data directory is created and migrated in a child process (pglite-init.ts: resident memory).
    if (opts.dataDir && !isInitialized(opts.dataDir)) await initializeInChild(opts.dataDir, opts.info);
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
    directUrl: null,
    pooled: false,
    direct: null,
    leadership: soleLeader,
    reads: primaryReads(prisma),
    readSql: null,
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

type QueryLog = readonly { emit: 'event'; level: 'query' }[] | undefined;

/**
 * A pg pool and Prisma over it; the pool serves Prisma's adapter and the direct batches (db/sql.ts) alike. Both send
 * every statement unnamed (Prisma's adapter names none unless given a `statementNameGenerator`; pg names none unless
 * a query has a `name`), which is what PgBouncer 1.18 carries in transaction mode.
 */
function openPool(databaseUrl: string, schema: string, pooled: boolean, max: number, log: QueryLog): { prisma: PrismaClient; sql: SqlDriver } {
  const url = new URL(databaseUrl);
  url.searchParams.delete('schema');
  const pool = new pg.Pool({
    connectionString: url.toString(),
    max,
    // Raw SQL (locks, SKIP LOCKED claims) must see the same schema as the generated queries. PgBouncer refuses the
    // `options` startup parameter: through it the role's own search_path must name the schema (checkPooledSchema).
    ...(pooled ? {} : { options: `-c search_path="${schema}"` }),
    connectionTimeoutMillis: 5_000,
  });
  // An idle connection's error (the server restarted) is not the process's: the next checkout connects anew.
  pool.on('error', () => {});
  const adapter = new PrismaPg(pool, { schema, disposeExternalPool: true });
  const prisma = new PrismaClient({ adapter, log: log ? [...log] : undefined });
  return { prisma, sql: pgDriver(pool, { timeoutMs: 30_000 }) };
}

/**
 * Through PgBouncer (DATABASE_DIRECT_URL set) the search_path is the role's, on DATABASE_URL and DATABASE_READ_URL
 * alike: the gateway's raw SQL names tables without their schema, so a `?schema=` other than the one the role's
 * search_path finds first is refused at start, naming the variable (run after migrations, which create the schema).
 */
export async function checkPooledSchema(database: Database): Promise<void> {
  if (!database.pooled) return;
  const sides: [string, SqlDriver | null][] = [['DATABASE_URL', database.sql], ['DATABASE_READ_URL', database.readSql]];
  for (const [variable, sql] of sides) {
    if (!sql) continue;
    // A replica that does not answer at start does not stop it (its reads go to the primary meanwhile).
    const read = sql.$queryRaw<{ schema: string | null }[]>`SELECT current_schema() AS schema`;
    const [row] = variable === 'DATABASE_URL' ? await read : await Promise.resolve(read).catch(() => [{ schema: database.schema }]);
    if (row?.schema !== database.schema) {
      throw new Error(
        `${variable}: through the pooler the search_path finds schema ${row?.schema ?? '(none)'}, not ${database.schema}; ` +
          `set the role's search_path (ALTER ROLE … SET search_path = "${database.schema}")`,
      );
    }
  }
}

/** Prisma's unique-constraint violation; v7 adapters carry no target, so callers name the field themselves. */
export function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: string }).code === 'P2002';
}

/**
 * PostgreSQL refuses the NUL character in text (22021) and in jsonb (22P05). The REST hooks refuse it up front
 * (api/input.ts); this names the database's refusal for whatever reaches it anyway (GraphQL arguments).
 */
export function isNulCharacterError(err: unknown): boolean {
  const cause = (err as { meta?: { driverAdapterError?: { cause?: { originalCode?: string } } } } | null)?.meta?.driverAdapterError?.cause;
  return cause?.originalCode === '22021' || cause?.originalCode === '22P05';
}
