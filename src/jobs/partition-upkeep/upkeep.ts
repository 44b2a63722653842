import type { Deps } from '../../deps.ts';
import { startSweep, yieldToEventLoop } from '../sweep.ts';
import {
  createMonthPartition,
  defaultPartitionMonths,
  deleteDefaultRowsBefore,
  deleteUsageRequestIdsBefore,
  dropMonthPartition,
  listMonthPartitions,
} from './store.ts';
import { MONTHS_AHEAD, monthStart, PARTITIONED_TABLES, partitionName, retentionCutoff, type RetentionKind } from './tables.ts';

type UpkeepDeps = Pick<Deps, 'db' | 'clock' | 'config'>;

/** Request ids deleted from the dedup table per statement: a dropped month's are deleted in short statements. */
const DEDUP_BATCH = 5_000;

export interface UpkeepResult {
  /** Partitions created, as `<table>_pYYYYMM`. */
  created: string[];
  /** Partitions dropped (their months past the retention bound). */
  dropped: string[];
  /** Rows moved out of a default partition into their month's new partition. */
  moved: number;
  /** Rows deleted: default partitions' rows and usage request ids from before the first month kept. */
  deleted: number;
}

/**
 * One run of the partition upkeep (CONTRACT §18), on the injected clock, for every partitioned table:
 * - creates the partitions of the current month and the next MONTHS_AHEAD, and of any month within retention that
 *   has rows in the default partition (moving them there);
 * - drops every month whose last day is past the table's retention bound (now − SVC_*_RETENTION_DAYS), whole;
 * - deletes what the default partition holds from before the first month kept, and, for usage, the request ids of the
 *   dropped months from usage_request_ids (the dedup table).
 * Idempotent; safe against a concurrent run (an advisory lock per change, existence checked under it).
 */
export async function runPartitionUpkeep(deps: UpkeepDeps, nowMs: number = deps.clock.now()): Promise<UpkeepResult> {
  const result: UpkeepResult = { created: [], dropped: [], moved: 0, deleted: 0 };
  const days: Record<RetentionKind, number> = {
    usage: deps.config.usageRetentionDays,
    events: deps.config.eventsRetentionDays,
    audit: deps.config.auditRetentionDays,
  };
  for (const table of PARTITIONED_TABLES) {
    const { bound, cutoff } = retentionCutoff(nowMs, days[table.retention]);
    const existing = new Set(await listMonthPartitions(deps.db, table));
    const wanted = new Set<number>();
    for (let k = 0; k <= MONTHS_AHEAD; k++) wanted.add(monthStart(nowMs, k));
    for (const m of await defaultPartitionMonths(deps.db, table, cutoff)) wanted.add(m);
    for (const start of [...wanted].sort((a, b) => a - b)) {
      if (existing.has(start)) continue;
      const moved = await createMonthPartition(deps.db, table, start);
      if (moved !== null) {
        result.created.push(partitionName(table.name, start));
        result.moved += moved;
      }
    }
    for (const start of existing) {
      if (monthStart(start, 1) > bound) continue;
      await dropMonthPartition(deps.db, table, start);
      result.dropped.push(partitionName(table.name, start));
    }
    result.deleted += await deleteDefaultRowsBefore(deps.db, table, cutoff);
    if (table.retention === 'usage') {
      for (;;) {
        const n = await deleteUsageRequestIdsBefore(deps.db, cutoff, DEDUP_BATCH);
        result.deleted += n;
        if (n < DEDUP_BATCH) break;
        await yieldToEventLoop();
      }
    }
  }
  return result;
}

/**
 * The background worker's partition upkeep: once at start, then every 10 minutes (wall time), on one replica at a time
 * (the sweeps' leadership, db/leadership.ts). Partitions are ready two months ahead, so a leader that dies leaves
 * nothing urgent: another replica takes over within two periods.
 */
export function startPartitionUpkeep(deps: UpkeepDeps & Pick<Deps, 'log' | 'database'>, everyMs = 600_000): { stop(): void } {
  return startSweep(
    deps.log,
    {
      run: async () => {
        const r = await runPartitionUpkeep(deps);
        if (r.created.length + r.dropped.length > 0) deps.log.info({ created: r.created, dropped: r.dropped, moved: r.moved }, 'partition upkeep');
        return r.created.length + r.dropped.length + r.deleted;
      },
      done: (n) => [{ changes: n }, 'partition upkeep done'],
      failed: 'partition upkeep failed; retrying on the next run',
    },
    everyMs,
    { leadership: deps.database.leadership, name: 'partition-upkeep' },
  );
}
