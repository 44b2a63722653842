import type { Db, Tx } from '../../db/client.ts';

export interface DayTotals {
  project_id: string;
  requests: bigint;
  succeeded: bigint;
  prompt: bigint;
  completion: bigint;
  cost: bigint;
}

export async function hasMarker(db: Db, marker: string): Promise<boolean> {
  return (await db.setting.findUnique({ where: { key: marker } })) !== null;
}

/** Unique: a second run (another replica) fails here, and its transaction writes nothing. */
export async function insertMarker(tx: Tx, marker: string, now: Date): Promise<void> {
  await tx.setting.create({ data: { key: marker, value: now.toISOString() } });
}

/** Per project with usage in [from, to): requests, succeeded, tokens and cost. */
export function dayTotals(tx: Tx, from: Date, to: Date): Promise<DayTotals[]> {
  return tx.$queryRaw<DayTotals[]>`
    SELECT project_id,
           count(*)::bigint AS requests,
           count(*) FILTER (WHERE status = 'succeeded')::bigint AS succeeded,
           coalesce(sum(prompt_tokens), 0)::bigint AS prompt,
           coalesce(sum(completion_tokens), 0)::bigint AS completion,
           coalesce(sum(cost_micros), 0)::bigint AS cost
      FROM usage_records
     WHERE created_at >= ${from} AND created_at < ${to}
     GROUP BY project_id
     ORDER BY project_id`;
}
