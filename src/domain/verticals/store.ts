import type { Prisma, VerticalJob } from '../../generated/prisma/client.ts';
import type { Db } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';

/**
 * Leases up to `limit` due jobs (queued and due, or running with an expired lease: a worker that stopped or crashed
 * mid-job) until `leaseUntil`, in one statement; a row claimed by one worker is invisible to the others until its
 * lease ends, so a restart resumes the work and two replicas never run it at once.
 */
export async function claimDue(db: Db, now: Date, leaseUntil: Date, limit: number): Promise<VerticalJob[]> {
  const rows = await db.$queryRaw<{ id: string }[]>`
    WITH due AS (
      SELECT j.id FROM vertical_jobs j
      WHERE (j.status = 'queued' AND j.run_after <= ${now})
         OR (j.status = 'running' AND j.lease_until <= ${now})
      ORDER BY j.run_after, j.id
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED
    )
    UPDATE vertical_jobs AS u SET status = 'running', lease_until = ${leaseUntil}, attempts = u.attempts + 1, updated_at = ${now}
    FROM due WHERE u.id = due.id
    RETURNING u.id`;
  if (rows.length === 0) return [];
  return db.verticalJob.findMany({ where: { id: { in: rows.map((r) => r.id) } }, orderBy: { id: 'asc' } });
}

/** Finishes a job this worker still holds (its lease unchanged): false when another worker took it over meanwhile. */
export async function finish(
  tx: Prisma.TransactionClient,
  job: VerticalJob,
  data: { status: 'succeeded' | 'failed'; result?: Prisma.InputJsonValue; error?: Prisma.InputJsonValue; inferenceIds: string[]; now: Date },
): Promise<boolean> {
  const { count } = await tx.verticalJob.updateMany({
    where: { id: job.id, status: 'running', leaseUntil: job.leaseUntil },
    data: {
      status: data.status,
      ...(data.result !== undefined ? { result: data.result } : {}),
      ...(data.error !== undefined ? { error: data.error } : {}),
      inferenceIds: data.inferenceIds,
      leaseUntil: null,
      finishedAt: data.now,
      updatedAt: data.now,
    },
  });
  return count === 1;
}

/**
 * Gives a held job back to the queue, to run again after `runAfter` (a transient failure). `uncounted`: the try does
 * not count against the job's attempts (it was turned away by a rate limit before reaching a provider). `callEnded`:
 * its model call ended uncharged and was forgotten, so the next try need not look for that call's usage record.
 */
export async function requeue(
  db: Db,
  job: VerticalJob,
  runAfter: Date,
  error: Prisma.InputJsonValue,
  now: Date,
  opts: { uncounted?: boolean; callEnded?: boolean } = {},
): Promise<void> {
  await db.verticalJob.updateMany({
    where: { id: job.id, status: 'running', leaseUntil: job.leaseUntil },
    data: {
      status: 'queued',
      runAfter,
      leaseUntil: null,
      error,
      updatedAt: now,
      ...(opts.uncounted ? { attempts: { decrement: 1 } } : {}),
      ...(opts.callEnded ? { requestId: null, callStartedAt: null } : {}),
    },
  });
}

/**
 * Records the job's next model call (a new request id, begun now) while this worker still holds the job: null when
 * it does not any more (another worker took it over), and then no call is made.
 */
export async function beginCall(db: Db, job: VerticalJob, now: Date): Promise<string | null> {
  const requestId = newId('req', now.getTime());
  const { count } = await db.verticalJob.updateMany({
    where: { id: job.id, status: 'running', leaseUntil: job.leaseUntil },
    data: { requestId, callStartedAt: now },
  });
  return count === 1 ? requestId : null;
}

/** The model call begun last for the job (by this worker or one that stopped), or null. */
export async function lastCall(db: Db, jobId: string): Promise<{ requestId: string; startedAt: Date | null } | null> {
  const row = await db.verticalJob.findUnique({ where: { id: jobId }, select: { requestId: true, callStartedAt: true } });
  return row?.requestId ? { requestId: row.requestId, startedAt: row.callStartedAt } : null;
}

/** The earliest time a job becomes claimable, in ms (Infinity when none). */
export async function nextDueMs(db: Db): Promise<number> {
  const rows = await db.$queryRaw<{ due: Date | null }[]>`
    SELECT min(CASE WHEN status = 'queued' THEN run_after ELSE lease_until END) AS due
    FROM vertical_jobs WHERE status IN ('queued', 'running')`;
  const due = rows[0]?.due;
  return due ? new Date(due).getTime() : Infinity;
}
