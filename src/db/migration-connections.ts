/**
 * What the migration engine (migration-engine.ts) connects through: a PostgreSQL pool, the caller's PGlite, or a
 * scratch PGlite, each with throwaway in-memory PGlites as shadow databases. Used by migrations.ts.
 */
import type { PGlite } from '@electric-sql/pglite';
import { PrismaPg } from '@prisma/adapter-pg';
import type { SqlDriverAdapter, SqlMigrationAwareDriverAdapterFactory } from '@prisma/driver-adapter-utils';
import pg from 'pg';

/** PGlite and its adapter, loaded on first use: a PostgreSQL deployment that is up to date never loads them. */
const pgliteModules = async () => {
  const [{ PGlite }, { PrismaPGlite }] = await Promise.all([import('@electric-sql/pglite'), import('pglite-prisma-adapter')]);
  return { PGlite, PrismaPGlite };
};

export type PostgresTarget = { kind: 'postgres'; url: string; schema?: string };
export type Query = (sql: string) => Promise<Record<string, unknown>[]>;

/** PostgreSQL's internal one-byte "char" type, which the engine's catalog queries return and adapter-pg rejects. */
const OID_CHAR = 18;
const OID_TEXT = 25;

/** What the engine connects through, and how to release everything it opened once the engine is done. */
export interface EngineConnection {
  factory: SqlMigrationAwareDriverAdapterFactory;
  close(): Promise<void>;
}

export interface DatabaseConnection extends EngineConnection {
  query: Query;
}

export function parsePostgresTarget(target: PostgresTarget) {
  const url = new URL(target.url);
  const schema = target.schema ?? url.searchParams.get('schema') ?? 'public';
  // `schema` is Prisma's parameter, not libpq's: pg must not see it.
  url.searchParams.delete('schema');
  return { connectionString: url.toString(), schema };
}

export function searchPathOption(schema: string): string {
  return `-c search_path=${quoteIdent(schema)}`;
}

export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * A pg client whose results label PostgreSQL's internal "char" (OID 18) as text: the engine's catalog queries select
 * such columns (e.g. pg_constraint.confdeltype) and adapter-pg rejects the type. Values are one-letter strings anyway.
 */
class CharAsTextClient extends pg.Client {
  override query(...args: any[]): any {
    const at = args.findIndex((a) => typeof a === 'function');
    if (at >= 0) {
      const callback = args[at] as (err: unknown, res: unknown) => void;
      args[at] = (err: unknown, res: unknown) => callback(err, err ? res : relabelCharFields(res));
      return (super.query as (...a: unknown[]) => unknown)(...args);
    }
    const result = (super.query as (...a: unknown[]) => any)(...args);
    return typeof result?.then === 'function' ? result.then(relabelCharFields) : result;
  }
}

function relabelCharFields(result: any): any {
  if (Array.isArray(result)) return result.map(relabelCharFields);
  for (const field of result?.fields ?? []) if (field.dataTypeID === OID_CHAR) field.dataTypeID = OID_TEXT;
  return result;
}

export function postgresConnection(target: PostgresTarget): DatabaseConnection {
  const { connectionString, schema } = parsePostgresTarget(target);
  const pool = new pg.Pool({
    connectionString,
    Client: CharAsTextClient,
    // Migrations create unqualified tables: they must land in the target schema, as with Prisma's `?schema=`.
    options: searchPathOption(schema),
    max: 4,
    connectionTimeoutMillis: 10_000,
  });
  const base = new PrismaPg(pool, { schema });
  const shadows = new ShadowDatabases(schema);
  const factory: SqlMigrationAwareDriverAdapterFactory = {
    provider: base.provider,
    adapterName: base.adapterName,
    connect: async () => withWholeScripts(await base.connect(), (sql) => pool.query(sql)),
    connectToShadowDb: () => shadows.connect(),
  };
  const close = async () => {
    await shadows.closeAll();
    await pool.end();
  };
  return { factory, query: pgClientQuery(pool), close };
}

export async function pgliteConnection(pglite: PGlite): Promise<DatabaseConnection> {
  const { PrismaPGlite } = await pgliteModules();
  const base = new PrismaPGlite(pglite);
  const shadows = new ShadowDatabases('public');
  const factory: SqlMigrationAwareDriverAdapterFactory = {
    provider: base.provider,
    adapterName: base.adapterName,
    // The caller owns this PGlite: it stays open after the engine is done.
    connect: async () => withWholeScripts(await base.connect(), (sql) => pglite.exec(sql)),
    connectToShadowDb: () => shadows.connect(),
  };
  return { factory, query: pgliteQuery(pglite), close: () => shadows.closeAll() };
}

/** For createMigration: no database of ours is involved, the engine only needs somewhere to replay the migrations. */
export function scratchConnection(): EngineConnection {
  const scratch = new ShadowDatabases('public');
  const factory: SqlMigrationAwareDriverAdapterFactory = {
    provider: 'postgres',
    adapterName: 'pglite-scratch',
    connect: () => scratch.connect(),
    connectToShadowDb: () => scratch.connect(),
  };
  return { factory, close: () => scratch.closeAll() };
}

/**
 * Throwaway in-memory PGlites as shadow databases, in the same schema as the database they stand for. The engine does
 * not dispose every adapter it opens, and an open PGlite keeps 10 s timers armed, so we close them all ourselves.
 */
class ShadowDatabases {
  private readonly open = new Set<PGlite>();
  constructor(private readonly schema: string) {}

  async connect(): Promise<SqlDriverAdapter> {
    const { PGlite, PrismaPGlite } = await pgliteModules();
    const db = new PGlite();
    this.open.add(db);
    const schema = quoteIdent(this.schema);
    if (this.schema !== 'public') await db.exec(`CREATE SCHEMA ${schema}; SET search_path TO ${schema}`);
    const adapter = withWholeScripts(await new PrismaPGlite(db).connect(), (sql) => db.exec(sql));
    adapter.getConnectionInfo = () => ({ schemaName: this.schema, supportsRelationJoins: true });
    adapter.dispose = () => this.close(db);
    return adapter;
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.open].map((db) => this.close(db)));
  }

  private async close(db: PGlite): Promise<void> {
    if (!this.open.delete(db)) return;
    await db.close();
  }
}

/**
 * Runs each migration script as one multi-statement query, as the native engine does (one implicit transaction):
 * adapter-pg splits scripts on every ";" (breaking string literals and function bodies) and pglite-prisma-adapter
 * does not await its script, so a failing migration would go unnoticed.
 */
function withWholeScripts(adapter: SqlDriverAdapter, run: (sql: string) => Promise<unknown>): SqlDriverAdapter {
  const onError = (adapter as unknown as { onError(e: unknown): never }).onError.bind(adapter);
  adapter.executeScript = async (script: string) => {
    try {
      await run(script);
    } catch (err) {
      onError(err);
    }
  };
  return adapter;
}

export function pgClientQuery(client: pg.Client | pg.Pool): Query {
  return async (sql) => (await client.query(sql)).rows;
}

export function pgliteQuery(pglite: PGlite): Query {
  return async (sql) => (await pglite.query<Record<string, unknown>>(sql)).rows;
}
