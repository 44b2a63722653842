import type { RawSql } from './sql.ts';

/**
 * Reads that may be served by a read replica (DATABASE_READ_URL, CONTRACT §18): usage and audit lists. A read goes to
 * the replica only when the replica has replayed every write committed on the primary before the read began, so a
 * caller always reads its own writes (and everyone else's already committed); otherwise, and while the replica does
 * not answer, it goes to the primary. The check is two one-row statements: the primary's WAL position, then the
 * replica's replay position compared with it.
 */
export interface LaggingReads<C> {
  /** Where the next read goes: the replica's client when it has caught up, else the primary's. */
  client(): Promise<C>;
  /** Whether a replica is configured. */
  readonly replica: boolean;
  /** Reads served by each side so far (the /metrics figures, tests). */
  readonly counts: { replica: number; primary: number };
}

/** A replica that failed to answer is skipped this long. */
const REPLICA_BACKOFF_MS = 10_000;

export function primaryReads<C>(primary: C): LaggingReads<C> {
  const counts = { replica: 0, primary: 0 };
  return {
    replica: false,
    counts,
    client: async () => {
      counts.primary++;
      return primary;
    },
  };
}

export function replicaReads<C>(
  primary: { client: C; sql: RawSql },
  replica: { client: C; sql: RawSql },
  now: () => number = Date.now,
): LaggingReads<C> {
  const counts = { replica: 0, primary: 0 };
  let skipUntil = 0;
  const toPrimary = () => {
    counts.primary++;
    return primary.client;
  };
  return {
    replica: true,
    counts,
    client: async () => {
      if (now() < skipUntil) return toPrimary();
      const [head] = await primary.sql.$queryRaw<{ lsn: string }[]>`SELECT pg_current_wal_lsn()::text AS lsn`;
      try {
        // Not in recovery: a primary itself (or a copy that is not a standby), current by definition.
        const [row] = await replica.sql.$queryRaw<{ current: boolean | null }[]>`
          SELECT (NOT pg_is_in_recovery() OR pg_last_wal_replay_lsn() >= ${head!.lsn}::pg_lsn) AS current`;
        if (row?.current !== true) return toPrimary();
      } catch {
        skipUntil = now() + REPLICA_BACKOFF_MS;
        return toPrimary();
      }
      counts.replica++;
      return replica.client;
    },
  };
}
