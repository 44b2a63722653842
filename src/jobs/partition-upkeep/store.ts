import { Prisma } from '../../generated/prisma/client.ts';
import type { Db, Tx } from '../../db/client.ts';
import { defaultPartitionName, monthOfKey, monthStart, partitionName, type PartitionedTable } from './tables.ts';

/** Our advisory lock space (as db/migrations.ts), second half: the partition upkeep. */
const LOCK = Prisma.sql`pg_advisory_xact_lock(${0x53564347}::int, ${0x70617274}::int)`;
/** DDL on a partitioned table waits at most this long for its lock, then fails and is retried on the next run. */
const LOCK_TIMEOUT = Prisma.raw(`SET LOCAL lock_timeout = '10s'`);
const TX = { maxWait: 10_000, timeout: 120_000 };

const ident = (name: string) => Prisma.raw(`"${name.replace(/"/g, '""')}"`);
const literal = (ms: number) => Prisma.raw(`'${new Date(ms).toISOString()}'`);

/** The month partitions of `table` (starts of their months, UTC), found by name. */
export async function listMonthPartitions(db: Db | Tx, table: PartitionedTable): Promise<number[]> {
  const rows = await db.$queryRaw<{ name: string }[]>`
    SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = to_regclass(${`"${table.name}"`})`;
  const pattern = new RegExp(`^${table.name}_p(\\d{6})$`);
  return rows
    .map((r) => pattern.exec(r.name)?.[1])
    .filter((k): k is string => k !== undefined)
    .map(monthOfKey)
    .sort((a, b) => a - b);
}

/** The months (starts, UTC) with rows in the default partition, from `cutoff` on. */
export async function defaultPartitionMonths(db: Db | Tx, table: PartitionedTable, cutoff: number): Promise<number[]> {
  const rows = await db.$queryRaw<{ m: string }[]>`
    SELECT DISTINCT to_char(date_trunc('month', ${ident(table.column)} AT TIME ZONE 'UTC'), 'YYYYMM') AS m
      FROM ${ident(defaultPartitionName(table.name))} WHERE ${ident(table.column)} >= ${new Date(cutoff)}`;
  return rows.map((r) => monthOfKey(r.m)).sort((a, b) => a - b);
}

/**
 * Creates the partition of the month beginning at `start` unless it exists: a table of the parent's shape, filled
 * with the rows of that month the default partition holds (moved, in the same transaction), then attached (which
 * builds the parent's indexes and triggers on it). Returns the rows moved, or null when the partition existed.
 */
export async function createMonthPartition(db: Db, table: PartitionedTable, start: number): Promise<number | null> {
  const name = partitionName(table.name, start);
  const end = monthStart(start, 1);
  const col = ident(table.column);
  return db.$transaction(async (tx) => {
    await tx.$executeRaw`${LOCK_TIMEOUT}`;
    await tx.$executeRaw`SELECT ${LOCK}`;
    const [found] = await tx.$queryRaw<{ exists: boolean }[]>`SELECT to_regclass(${`"${name}"`}) IS NOT NULL AS exists`;
    if (found!.exists) return null;
    await tx.$executeRaw`CREATE TABLE ${ident(name)} (LIKE ${ident(table.name)} INCLUDING DEFAULTS)`;
    const moved = await tx.$executeRaw`
      WITH moved AS (
        DELETE FROM ${ident(defaultPartitionName(table.name))} WHERE ${col} >= ${literal(start)} AND ${col} < ${literal(end)}
        RETURNING *
      ) INSERT INTO ${ident(name)} SELECT * FROM moved`;
    await tx.$executeRaw`
      ALTER TABLE ${ident(table.name)} ATTACH PARTITION ${ident(name)} FOR VALUES FROM (${literal(start)}) TO (${literal(end)})`;
    return moved;
  }, TX);
}

/** Drops the partition of the month beginning at `start` (every row of that month goes at once). */
export async function dropMonthPartition(db: Db, table: PartitionedTable, start: number): Promise<void> {
  await db.$transaction(async (tx) => {
    await tx.$executeRaw`${LOCK_TIMEOUT}`;
    await tx.$executeRaw`SELECT ${LOCK}`;
    await tx.$executeRaw`DROP TABLE IF EXISTS ${ident(partitionName(table.name, start))}`;
  }, TX);
}

/** Deletes the default partition's rows from before `cutoff` (months dropped whole elsewhere). */
export function deleteDefaultRowsBefore(db: Db, table: PartitionedTable, cutoff: number): Promise<number> {
  return db.$executeRaw`
    DELETE FROM ${ident(defaultPartitionName(table.name))} WHERE ${ident(table.column)} < ${new Date(cutoff)}`;
}

/**
 * Deletes up to `limit` request ids of usage records from before `cutoff` from the dedup table (their records' months
 * are dropped); returns how many.
 */
export function deleteUsageRequestIdsBefore(db: Db, cutoff: number, limit: number): Promise<number> {
  return db.$executeRaw`
    DELETE FROM usage_request_ids WHERE request_id IN (
      SELECT request_id FROM usage_request_ids WHERE created_at < ${new Date(cutoff)} LIMIT ${limit})`;
}

