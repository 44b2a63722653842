import type { Tx } from '../../db/client.ts';
import type { RawSql } from '../../db/sql.ts';
import type { InferenceOutcome } from '../usage/outcome.ts';
import type { ContentSealer } from './ports.ts';
import type { RetainedRecord } from './types.ts';

/** A retained record's content as it is stored: sealed (AES-256-GCM, the inference id as associated data), or null. */
export function sealedContent(sealer: ContentSealer, r: RetainedRecord): string | null {
  if (r.sealed != null) return r.sealed;
  return r.content ? sealer.seal(JSON.stringify(r.content), r.inferenceId) : null;
}

/** The outcome in the form it may be written anywhere outside memory (a dead letter, a log line): its content sealed. */
export function outcomeAtRest(sealer: ContentSealer, o: InferenceOutcome): InferenceOutcome {
  if (!o.retained || o.retained.content == null) return o;
  const { content: _content, ...rest } = o.retained;
  return { ...o, retained: { ...rest, sealed: sealedContent(sealer, o.retained) } };
}

/**
 * The retained records of a batch of outcomes, written in the outcome writer's transaction (off the request path):
 * each content sealed here, one statement, the batch as one JSON parameter; ON CONFLICT: an outcome written again is
 * written once.
 */
export async function insertRetainedInferences(tx: RawSql, sealer: ContentSealer, outcomes: readonly InferenceOutcome[]): Promise<void> {
  const rows = outcomes
    .filter((o) => o.retained)
    .map((o) => ({
      id: o.retained!.inferenceId,
      project_id: o.projectId,
      request_id: o.requestId,
      status: o.retained!.status,
      sealed: sealedContent(sealer, o.retained!),
      retained_until: o.retained!.retainedUntil === null ? null : new Date(o.retained!.retainedUntil).toISOString(),
      created_at: o.createdAt.toISOString(),
    }));
  if (rows.length === 0) return;
  await tx.$executeRaw`
    INSERT INTO retained_inferences (id, project_id, request_id, status, sealed, retained_until, created_at)
    SELECT x.id, x.project_id, x.request_id, x.status,
           CASE WHEN p.retention_mode = 'zero' THEN NULL ELSE x.sealed END,
           CASE WHEN p.retention_mode = 'zero' THEN NULL ELSE x.retained_until END,
           x.created_at
    FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS x(
      id text, project_id text, request_id text, status text, sealed text, retained_until timestamptz, created_at timestamptz)
    -- A project switched to zero retention after the request was answered keeps nothing of it either.
    LEFT JOIN project_privacy p ON p.project_id = x.project_id
    ON CONFLICT (id) DO NOTHING`;
}

/**
 * Purges content past its end: its own, or the project's current period (shortened since), or all of it once the
 * project has zero retention. The id stays (GET answers record_not_retained), the sealed content goes.
 */
export async function purgeExpiredContent(db: Tx, now: Date, limit: number): Promise<number> {
  return db.$executeRaw`
    UPDATE retained_inferences SET sealed = NULL
    WHERE id IN (
      SELECT r.id FROM retained_inferences r LEFT JOIN project_privacy p ON p.project_id = r.project_id
      WHERE r.sealed IS NOT NULL
        AND (r.retained_until <= ${now} OR p.retention_mode = 'zero' OR r.created_at + make_interval(days => p.retention_days) <= ${now})
      LIMIT ${limit})`;
}
