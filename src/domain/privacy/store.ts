import type { Tx } from '../../db/client.ts';
import type { InferenceOutcome } from '../usage/outcome.ts';

/**
 * The retained records of a batch of outcomes, written in the outcome writer's transaction (off the request path):
 * one statement, the batch as one JSON parameter; ON CONFLICT: an outcome written again is written once.
 */
export async function insertRetainedInferences(tx: Tx, outcomes: readonly InferenceOutcome[]): Promise<void> {
  const rows = outcomes
    .filter((o) => o.retained)
    .map((o) => ({
      id: o.retained!.inferenceId,
      project_id: o.projectId,
      request_id: o.requestId,
      status: o.retained!.status,
      sealed: o.retained!.sealed,
      retained_until: o.retained!.retainedUntil === null ? null : new Date(o.retained!.retainedUntil).toISOString(),
      created_at: o.createdAt.toISOString(),
    }));
  if (rows.length === 0) return;
  await tx.$executeRaw`
    INSERT INTO retained_inferences (id, project_id, request_id, status, sealed, retained_until, created_at)
    SELECT * FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS x(
      id text, project_id text, request_id text, status text, sealed text, retained_until timestamptz, created_at timestamptz)
    ON CONFLICT (id) DO NOTHING`;
}

/** Purges content past its end: the id stays (GET answers record_not_retained), the sealed content goes. */
export async function purgeExpiredContent(db: Tx, now: Date, limit: number): Promise<number> {
  return db.$executeRaw`
    UPDATE retained_inferences SET sealed = NULL
    WHERE id IN (SELECT id FROM retained_inferences WHERE retained_until <= ${now} AND sealed IS NOT NULL ORDER BY retained_until LIMIT ${limit})`;
}
