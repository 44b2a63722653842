/**
 * The tables partitioned by month (CONTRACT §18; prisma/migrations/*_partitions): each is PARTITION BY RANGE on its
 * time column, with one partition per UTC month named `<table>_pYYYYMM` and a `<table>_default` partition that takes
 * a row of a month whose partition does not exist (never an insert error).
 */
export type RetentionKind = 'usage' | 'events' | 'audit';

export interface PartitionedTable {
  name: string;
  /** The partition key. */
  column: string;
  /** Which SVC_*_RETENTION_DAYS bounds it. */
  retention: RetentionKind;
}

export const PARTITIONED_TABLES: readonly PartitionedTable[] = [
  { name: 'usage_records', column: 'created_at', retention: 'usage' },
  { name: 'events', column: 'created_at', retention: 'events' },
  { name: 'webhook_deliveries', column: 'created_at', retention: 'events' },
  { name: 'webhook_attempts', column: 'attempted_at', retention: 'events' },
  { name: 'audit_events', column: 'created_at', retention: 'audit' },
];

/** Partitions kept ready ahead of the current month (the current month and the next MONTHS_AHEAD). */
export const MONTHS_AHEAD = 2;

/** The first instant (UTC) of the month of `ms`, `add` months later. */
export function monthStart(ms: number, add = 0): number {
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + add, 1);
}

/** YYYYMM of the month that begins at `start`. */
export function monthKey(start: number): string {
  const d = new Date(start);
  return `${d.getUTCFullYear()}${String(d.getUTCMonth() + 1).padStart(2, '0')}`;
}

/** The month that begins at the start of YYYYMM. */
export function monthOfKey(key: string): number {
  return Date.UTC(Number(key.slice(0, 4)), Number(key.slice(4, 6)) - 1, 1);
}

export const partitionName = (table: string, start: number): string => `${table}_p${monthKey(start)}`;
export const defaultPartitionName = (table: string): string => `${table}_default`;

/**
 * The retention bound: rows older than `now - days` are past it. A month is dropped once its last day is past it
 * (its end is at or before the bound); rows before the returned cutoff (the first month kept) are all in such months.
 */
export function retentionCutoff(nowMs: number, days: number): { bound: number; cutoff: number } {
  const bound = nowMs - days * 86_400_000;
  return { bound, cutoff: monthStart(bound) };
}
