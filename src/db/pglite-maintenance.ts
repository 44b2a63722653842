import type { PGlite } from '@electric-sql/pglite';

/**
 * The embedded PGlite runs PostgreSQL in one process without its background workers: no checkpointer and no
 * autovacuum. This does the part of their work the gateway needs, on a timer (unref'd) that fires between the
 * queries of long jobs too:
 *
 * - CHECKPOINT once `checkpointWalBytes` (64 MB) of write-ahead log were written since the last one. Nothing else ever
 *   checkpoints, and PGlite 0.4.3 stops answering for good once about 530 MB of WAL has piled up (found indexing
 *   100,000 RAG chunks in memory: inserts of 500 tsvector rows at a time stalled after the 160th; with a CHECKPOINT at
 *   64 MB the same inserts ran through at a steady pace). Bulk inserts write about 13 MB of WAL a second here, so a
 *   check every 5 s stays far below the stall.
 * - ANALYZE once `analyzeWalBytes` (16 MB) of WAL were written since the last one (and once at start when the
 *   database already holds that much), as autovacuum's analyze would. Without statistics the planner takes every
 *   table for small: a full-text search then read each of a project's chunks through the project index instead of the
 *   GIN index (11,000 chunks: keyword p50 122 ms).
 *
 * A failed round (the database closing) is tried again at the next tick.
 */
export interface PgliteMaintenance {
  /** One round now: what it did. */
  runDue(): Promise<{ analyzed: boolean; checkpointed: boolean }>;
  stop(): void;
}

export interface PgliteMaintenanceOptions {
  everyMs?: number;
  checkpointWalBytes?: number;
  analyzeWalBytes?: number;
}

export function startPgliteMaintenance(pglite: PGlite, opts: PgliteMaintenanceOptions = {}): PgliteMaintenance {
  const checkpointWalBytes = opts.checkpointWalBytes ?? 64 * 1024 * 1024;
  const analyzeWalBytes = opts.analyzeWalBytes ?? 16 * 1024 * 1024;
  let analyzedAt = '0/0';
  let running: Promise<{ analyzed: boolean; checkpointed: boolean }> | null = null;
  const round = async () => {
    const r = await pglite.query<{ lsn: string; sinceCheckpoint: string; sinceAnalyze: string }>(
      `SELECT pg_current_wal_lsn()::text AS lsn,
        pg_wal_lsn_diff(pg_current_wal_lsn(), redo_lsn)::text AS "sinceCheckpoint",
        pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::text AS "sinceAnalyze"
       FROM pg_control_checkpoint()`,
      [analyzedAt],
    );
    const row = r.rows[0]!;
    const analyzed = Number(row.sinceAnalyze) >= analyzeWalBytes;
    if (analyzed) {
      await pglite.exec('ANALYZE');
      analyzedAt = row.lsn;
    }
    const checkpointed = Number(row.sinceCheckpoint) >= checkpointWalBytes;
    if (checkpointed) await pglite.exec('CHECKPOINT');
    return { analyzed, checkpointed };
  };
  const runDue = () => (running ??= round().finally(() => (running = null)));
  const timer = setInterval(() => {
    if (!pglite.closed) runDue().catch(() => {});
  }, opts.everyMs ?? 5_000);
  timer.unref();
  return { runDue, stop: () => clearInterval(timer) };
}
