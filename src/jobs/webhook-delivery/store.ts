import type { Db, Tx } from '../../db/client.ts';
import type { RawSql } from '../../db/sql.ts';

export type AttemptStatus = 'succeeded' | 'retrying' | 'failed';

/** The earliest time a pending or retrying delivery becomes claimable (its due time, or the end of its lease), in ms. */
export async function nextDueMs(db: Db): Promise<number> {
  const rows = await db.$queryRaw<{ due: Date | null }[]>`
    SELECT min(GREATEST(d.next_attempt_at, COALESCE(d.lease_until, d.next_attempt_at))) AS due
    FROM webhook_deliveries d
    WHERE d.status IN ('pending', 'retrying') AND d.next_attempt_at IS NOT NULL`;
  const due = rows[0]?.due;
  return due ? new Date(due).getTime() : Infinity;
}

/** Locks the row: a concurrent disable (which marks pending retries failed) is ordered before or after the caller. */
export async function lockForAttempt(tx: Tx, id: string): Promise<{ status: string; attempts: number; firstAttemptAt: Date | null } | undefined> {
  const [current] = await tx.$queryRaw<{ status: string; attempts: number; firstAttemptAt: Date | null }[]>`
    SELECT status, attempts, first_attempt_at AS "firstAttemptAt" FROM webhook_deliveries WHERE id = ${id} FOR UPDATE`;
  return current;
}

export async function lockForExpiry(tx: Tx, id: string): Promise<{ status: string; attempts: number; responseStatus: number | null } | undefined> {
  const [current] = await tx.$queryRaw<{ status: string; attempts: number; responseStatus: number | null }[]>`
    SELECT status, attempts, response_status AS "responseStatus" FROM webhook_deliveries WHERE id = ${id} FOR UPDATE`;
  return current;
}

export async function webhookStatusOf(tx: Tx, webhookId: string): Promise<string | undefined> {
  return (await tx.webhook.findUnique({ where: { id: webhookId }, select: { status: true } }))?.status;
}

export async function insertAttempt(
  tx: Tx,
  attempt: { id: string; deliveryId: string; attempt: number; attemptedAt: Date; responseStatus: number | null; durationMs: number; error: string | null },
): Promise<void> {
  await tx.webhookAttempt.create({ data: attempt });
}

export async function updateAfterAttempt(
  tx: Tx,
  id: string,
  data: { attempts: number; firstAttemptAt: Date; lastAttemptAt: Date; responseStatus: number | null; status: AttemptStatus; nextAttemptAt: Date | null },
): Promise<void> {
  await tx.webhookDelivery.update({ where: { id }, data: { ...data, leaseUntil: null } });
}

export async function markFailed(tx: Tx, id: string): Promise<void> {
  await tx.webhookDelivery.update({ where: { id }, data: { status: 'failed', nextAttemptAt: null, leaseUntil: null } });
}

export async function lastAttemptError(tx: Tx, deliveryId: string): Promise<string | null | undefined> {
  return (await tx.webhookAttempt.findFirst({ where: { deliveryId }, orderBy: { attempt: 'desc' }, select: { error: true } }))?.error;
}

/** Fails the delivery if still open (pending or retrying), without an attempt. */
export async function failIfOpen(db: Db, id: string): Promise<void> {
  await db.webhookDelivery.updateMany({
    where: { id, status: { in: ['pending', 'retrying'] } },
    data: { status: 'failed', nextAttemptAt: null, leaseUntil: null },
  });
}

export interface SucceededAttempt {
  id: string;
  attempt_id: string;
  at: string;
  response_status: number | null;
  duration_ms: number;
}

/**
 * ONE statement for many succeeded attempts (the attempt rows and the deliveries' new state). A delivery finished
 * meanwhile (its webhook disabled) keeps its status; the attempt is still recorded. Returns each delivery's attempt
 * number and status.
 */
export async function recordSucceeded(db: RawSql, rows: readonly SucceededAttempt[]): Promise<Map<string, { attempt: number; status: AttemptStatus }>> {
  const [out] = await db.$queryRaw<{ done: [string, number, AttemptStatus][] | string | null }[]>`
    WITH x AS (
      SELECT * FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
        AS x(id text, attempt_id text, at timestamptz, response_status int, duration_ms int)
    ), d AS (
      UPDATE webhook_deliveries AS w SET
        attempts = w.attempts + 1,
        first_attempt_at = COALESCE(w.first_attempt_at, x.at),
        last_attempt_at = x.at,
        response_status = x.response_status,
        status = CASE WHEN w.status IN ('pending', 'retrying') THEN 'succeeded' ELSE w.status END,
        next_attempt_at = NULL,
        lease_until = NULL
      FROM x WHERE w.id = x.id
      RETURNING w.id, w.attempts, w.status
    ), a AS (
      INSERT INTO webhook_attempts (id, delivery_id, attempt, attempted_at, response_status, duration_ms, error)
      SELECT x.attempt_id, d.id, d.attempts, x.at, x.response_status, x.duration_ms, NULL FROM d JOIN x ON x.id = d.id
      RETURNING 1
    )
    SELECT (SELECT json_agg(json_build_array(d.id, d.attempts, d.status)) FROM d) AS done, (SELECT count(*) FROM a) AS n`;
  const done = typeof out?.done === 'string' ? (JSON.parse(out.done) as [string, number, AttemptStatus][]) : (out?.done ?? []);
  return new Map(done.map(([id, attempt, status]) => [id, { attempt: Number(attempt), status }]));
}
