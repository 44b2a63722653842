import type { PGlite, Transaction as PGliteTransaction } from '@electric-sql/pglite';
import type { Pool, PoolClient } from 'pg';

/**
 * What a set-based store function needs: raw SQL as a tagged template, each `${value}` sent as a parameter (never
 * spliced into the text). Prisma's client and its interactive transactions have this shape already, so the same
 * function runs inside a Prisma transaction or on the driver directly (`SqlDriver.transaction`).
 *
 * Results differ by who runs the statement: cast in SQL what the caller reads (`::int`, `::text`), and read bigint and
 * json columns as `BigInt(String(x))` / "string or parsed" (Prisma hands bigint as BigInt, pg as a string; json may
 * come parsed or as text).
 */
export interface RawSql {
  $queryRaw<T = unknown>(strings: TemplateStringsArray, ...values: unknown[]): PromiseLike<T>;
  $executeRaw(strings: TemplateStringsArray, ...values: unknown[]): PromiseLike<number>;
}

/**
 * The database driver itself, under Prisma: raw statements without Prisma's per-query work (its parameters are
 * JSON-encoded and decoded again on their way to the driver, which for a batch's one large JSON parameter cost the
 * worker more than the statements). A statement on the driver itself commits alone; `transaction` runs several in one.
 * The background writers' batches use it: the outcome writer (jobs/outcomes), the delivery worker's successes.
 */
export interface SqlDriver extends RawSql {
  transaction<T>(fn: (sql: RawSql) => Promise<T>): Promise<T>;
  /**
   * Hears every statement's text as it is sent, BEGIN and COMMIT included: what Prisma's query log is for its own
   * statements (the hot-path tests count both).
   */
  onStatement(listener: (text: string) => void): void;
}

/** `a ${x} b ${y}` as `a $1 b $2` and [x, y]. */
export function toStatement(strings: TemplateStringsArray): string {
  let text = strings[0]!;
  for (let i = 1; i < strings.length; i++) text += `$${i}${strings[i]}`;
  return text;
}

/** Prepared statement texts by template (a template literal's strings array is the same object on every call). */
const texts = new WeakMap<TemplateStringsArray, string>();
const textOf = (strings: TemplateStringsArray): string => {
  let text = texts.get(strings);
  if (text === undefined) texts.set(strings, (text = toStatement(strings)));
  return text;
};

type Result = { rows: unknown[]; affected: number };
type Run = (text: string, values?: unknown[]) => Promise<Result>;
const fromPg = (r: { rows: unknown[]; rowCount: number | null }): Result => ({ rows: r.rows, affected: r.rowCount ?? 0 });
const fromPglite = (r: { rows: unknown[]; affectedRows?: number }): Result => ({ rows: r.rows, affected: r.affectedRows ?? 0 });

/** The statement listeners of one driver (none but in tests: then sending costs one length check). */
class StatementLog {
  private readonly listeners: ((text: string) => void)[] = [];
  readonly add = (listener: (text: string) => void): void => {
    this.listeners.push(listener);
  };
  tell(text: string): void {
    for (const l of this.listeners) l(text);
  }
  /** `run`, telling the listeners each text first. */
  heard(run: Run): Run {
    return (text, values) => {
      this.tell(text);
      return run(text, values);
    };
  }
}

function rawSql(run: Run): RawSql {
  return {
    $queryRaw: <T>(strings: TemplateStringsArray, ...values: unknown[]) => run(textOf(strings), values).then((r) => r.rows as T),
    $executeRaw: (strings: TemplateStringsArray, ...values: unknown[]) => run(textOf(strings), values).then((r) => r.affected),
  };
}

/**
 * PostgreSQL through the pool Prisma's adapter uses too (db/client.ts). BEGIN and the transaction's statement timeout
 * travel as one message; a failed statement rolls the transaction back and the connection goes back to the pool
 * (destroyed instead if the rollback fails too or the connection was lost).
 */
export function pgDriver(pool: Pool, opts: { timeoutMs: number }): SqlDriver {
  const begin = `BEGIN; SET LOCAL statement_timeout = ${Math.floor(opts.timeoutMs)}`;
  const log = new StatementLog();
  return {
    ...rawSql(log.heard((text, values) => pool.query(text, values).then(fromPg))),
    onStatement: log.add,
    async transaction<T>(fn: (sql: RawSql) => Promise<T>): Promise<T> {
      const client: PoolClient = await pool.connect();
      const run = log.heard((text, values) => client.query(text, values).then(fromPg));
      let broken: Error | undefined;
      // A connection lost meanwhile (PostgreSQL restarted) is an 'error' event on the client, which must not go
      // unheard (it would end the process); the statement in flight fails anyway, and the client is not reused.
      const lost = (err: Error) => (broken = err);
      client.on('error', lost);
      try {
        await run(begin);
        const result = await fn(rawSql(run));
        await run('COMMIT');
        return result;
      } catch (err) {
        await run('ROLLBACK').catch((e: Error) => (broken = e));
        throw err;
      } finally {
        client.off('error', lost);
        client.release(broken);
      }
    },
  };
}

/** The embedded PGlite: its own transaction (PGlite runs one at a time, Prisma's adapter included). */
export function pgliteDriver(pglite: PGlite): SqlDriver {
  const log = new StatementLog();
  return {
    ...rawSql(log.heard((text, values) => pglite.query(text, values).then(fromPglite))),
    onStatement: log.add,
    transaction<T>(fn: (sql: RawSql) => Promise<T>): Promise<T> {
      // PGlite sends its own BEGIN and COMMIT; the listeners hear them as the statements they are.
      return pglite.transaction(async (tx: PGliteTransaction) => {
        const run = log.heard((text, values) => tx.query(text, values).then(fromPglite));
        log.tell('BEGIN');
        const result = await fn(rawSql(run));
        log.tell('COMMIT');
        return result;
      });
    },
  };
}
