import { Prisma } from '../generated/prisma/client.ts';
import type { Tx } from './client.ts';

/**
 * Rows leased to a worker: webhook deliveries, RAG documents being indexed, evaluation runs, vertical jobs. A claim
 * picks due rows no other worker holds (`FOR UPDATE SKIP LOCKED`, so replicas claiming at once never take the same
 * row) and sets their `lease_until` in the same statement; until then the row is the claimer's, after it any worker
 * may claim it again (its worker crashed or was restarted). A worker checks that it still holds a lease before it
 * writes the work's result, and renews or releases it only while it holds it.
 *
 * A lease is named by the end it was given (`until`: a lease never renewed; a claim after it ran out gives another
 * end) or, where the table records one, by its owner (`lease_owner`: a lease renewed as the work goes on).
 */

/** The leased tables, by their SQL names. Identifiers come from here only, never from input. */
const TABLES = {
  webhook_deliveries: { sql: Prisma.raw('webhook_deliveries'), owned: false, model: (db: Tx) => db.webhookDelivery as unknown as UpdateMany },
  rag_documents: { sql: Prisma.raw('rag_documents'), owned: false, model: (db: Tx) => db.ragDocument as unknown as UpdateMany },
  eval_runs: { sql: Prisma.raw('eval_runs'), owned: true, model: (db: Tx) => db.evalRun as unknown as UpdateMany },
  vertical_jobs: { sql: Prisma.raw('vertical_jobs'), owned: false, model: (db: Tx) => db.verticalJob as unknown as UpdateMany },
  batches: { sql: Prisma.raw('batches'), owned: true, model: (db: Tx) => db.batch as unknown as UpdateMany },
} as const;

export type LeasedTable = keyof typeof TABLES;

type UpdateMany = { updateMany(args: { where: object; data: object }): Promise<{ count: number }> };

/** What a leased table's rows are filtered and updated with (its Prisma model's inputs). */
interface Models {
  webhook_deliveries: { where: Prisma.WebhookDeliveryWhereInput; data: Prisma.WebhookDeliveryUpdateManyMutationInput };
  rag_documents: { where: Prisma.RagDocumentWhereInput; data: Prisma.RagDocumentUpdateManyMutationInput };
  eval_runs: { where: Prisma.EvalRunWhereInput; data: Prisma.EvalRunUpdateManyMutationInput };
  vertical_jobs: { where: Prisma.VerticalJobWhereInput; data: Prisma.VerticalJobUpdateManyMutationInput };
  batches: { where: Prisma.BatchWhereInput; data: Prisma.BatchUpdateManyMutationInput };
}

/** A lease a worker holds on a row: by the end it was given, or by owner (tables that record one). */
export type Lease = { id: string; until: Date } | { id: string; owner: string };

export interface Claim {
  now: Date;
  /** The lease's end. */
  until: Date;
  limit: number;
  /**
   * Which rows are due, besides a free lease (`lease_until` NULL or passed, which the claim adds): a condition on
   * `d`, the table's row, e.g. `d.status = 'processing' AND d.next_attempt_at <= now`.
   */
  due: Prisma.Sql;
  /** The order due rows are claimed in (columns of `d`). */
  orderBy: Prisma.Sql;
  /** The worker taking the lease (tables that record an owner). */
  owner?: string;
  /** Columns the claim sets besides the lease (`u` is the row): `attempts = u.attempts + 1`, a status. */
  set?: Prisma.Sql;
  /**
   * Tables joined to each claimed row for what it returns (the webhook claim returns its webhook's URL and secret and
   * its event, all an attempt needs, in the claim's one statement): `tables` after FROM, `on` their join to `u`.
   */
  join?: { tables: Prisma.Sql; on: Prisma.Sql };
  /** What each claimed row returns (`u` and the joined tables); default its id. */
  returning?: Prisma.Sql;
}

/**
 * Leases up to `limit` due rows of `table` until `until`, in one statement (a CTE that selects them `FOR UPDATE OF d
 * SKIP LOCKED`, and the UPDATE that sets their lease). Returns what `returning` names of each.
 */
export function claimLeases<T = { id: string }>(db: Tx, table: LeasedTable, c: Claim): Promise<T[]> {
  const t = TABLES[table];
  if (c.owner !== undefined && !t.owned) throw new Error(`${table} records no lease owner`);
  const sets = [Prisma.sql`lease_until = ${c.until}`];
  if (c.owner !== undefined) sets.push(Prisma.sql`lease_owner = ${c.owner}`);
  if (c.set) sets.push(c.set);
  return db.$queryRaw<T[]>`
    WITH due AS (
      SELECT d.id FROM ${t.sql} d
      WHERE (d.lease_until IS NULL OR d.lease_until <= ${c.now}) AND (${c.due})
      ORDER BY ${c.orderBy}
      LIMIT ${c.limit}
      FOR UPDATE OF d SKIP LOCKED
    )
    UPDATE ${t.sql} AS u SET ${Prisma.join(sets, ', ')}
    FROM due${c.join ? Prisma.sql`, ${c.join.tables}` : Prisma.empty}
    WHERE u.id = due.id${c.join ? Prisma.sql` AND ${c.join.on}` : Prisma.empty}
    RETURNING ${c.returning ?? Prisma.sql`u.id`}`;
}

function heldBy(table: LeasedTable, lease: Lease): { id: string; leaseUntil: Date } | { id: string; leaseOwner: string } {
  if (!('owner' in lease)) return { id: lease.id, leaseUntil: lease.until };
  if (!TABLES[table].owned) throw new Error(`${table} records no lease owner`);
  return { id: lease.id, leaseOwner: lease.owner };
}

/**
 * Whether this worker still holds the lease, locking the row until the transaction ends (the transaction that writes
 * the work's result: a worker that took the row over meanwhile waits, then finds the result written and its own
 * lease's end in the past). `where`: more the row must satisfy (SQL on its columns, e.g. its status).
 */
export async function holdsLease(tx: Tx, table: LeasedTable, lease: Lease, where?: Prisma.Sql): Promise<boolean> {
  const held = heldBy(table, lease);
  const token = 'leaseOwner' in held ? Prisma.sql`lease_owner = ${held.leaseOwner}` : Prisma.sql`lease_until = ${held.leaseUntil}`;
  const rows = await tx.$queryRaw<{ id: string }[]>`
    SELECT id FROM ${TABLES[table].sql} WHERE id = ${lease.id} AND ${token}${where ? Prisma.sql` AND ${where}` : Prisma.empty} FOR UPDATE`;
  return rows.length === 1;
}

/** Updates the row only while this worker holds its lease (and it satisfies `where`); false: it does not any more. */
export async function updateLeased<T extends LeasedTable>(db: Tx, table: T, lease: Lease, opts: { where?: Models[T]['where']; data: Models[T]['data'] }): Promise<boolean> {
  const { count } = await TABLES[table].model(db).updateMany({ where: { ...opts.where, ...heldBy(table, lease) }, data: opts.data });
  return count === 1;
}

/** Moves the end of a lease this worker holds by owner to `until`; false: the lease was lost (or `where` fails). */
export function renewLease<T extends LeasedTable>(db: Tx, table: T, lease: Lease & { owner: string }, until: Date, where?: Models[T]['where']): Promise<boolean> {
  return updateLeased(db, table, lease, { where, data: { leaseUntil: until } as Models[T]['data'] });
}

/**
 * Ends a lease this worker holds, writing `data` with it (the work's result, or the row given back to the queue);
 * false: the lease was lost (another worker took the row over) or `where` fails, and nothing was written.
 */
export function releaseLease<T extends LeasedTable>(db: Tx, table: T, lease: Lease, opts: { where?: Models[T]['where']; data?: Models[T]['data'] }): Promise<boolean> {
  const released = 'owner' in lease ? { leaseUntil: null, leaseOwner: null } : { leaseUntil: null };
  return updateLeased(db, table, lease, { where: opts.where, data: { ...opts.data, ...released } as Models[T]['data'] });
}

/**
 * Gives back rows this worker leased but never worked on (deliveries handed to it, not sent when it stops), so any
 * worker claims them now rather than when their lease ends. Only the rows that still satisfy `where`.
 */
export async function releaseUnworked<T extends LeasedTable>(db: Tx, table: T, ids: string[], opts: { where?: Models[T]['where']; data?: Models[T]['data'] }): Promise<number> {
  const { count } = await TABLES[table].model(db).updateMany({ where: { ...opts.where, id: { in: ids } }, data: { ...opts.data, leaseUntil: null } });
  return count;
}
