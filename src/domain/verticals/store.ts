import { Prisma, type VerticalJob } from '../../generated/prisma/client.ts';
import type { Db } from '../../db/client.ts';
import { claimLeases, releaseLease, updateLeased } from '../../db/leases.ts';
import { newId } from '../../db/ids.ts';

/** The lease a worker holds on a job it claimed: named by its end (a job's lease is never renewed). */
const leaseOf = (job: VerticalJob) => ({ id: job.id, until: job.leaseUntil! });

/**
 * Leases up to `limit` due jobs (queued and due, or running with an expired lease: a worker that stopped or crashed
 * mid-job) until `leaseUntil`, in one statement (db/leases.ts); a row claimed by one worker is invisible to the others
 * until its lease ends, so a restart resumes the work and two replicas never run it at once.
 */
export async function claimDue(db: Db, now: Date, leaseUntil: Date, limit: number): Promise<VerticalJob[]> {
  const rows = await claimLeases(db, 'vertical_jobs', {
    now,
    until: leaseUntil,
    limit,
    due: Prisma.sql`(d.status = 'queued' AND d.run_after <= ${now}) OR (d.status = 'running' AND d.lease_until <= ${now})`,
    orderBy: Prisma.sql`d.run_after, d.id`,
    set: Prisma.sql`status = 'running', attempts = u.attempts + 1, updated_at = ${now}`,
  });
  if (rows.length === 0) return [];
  return db.verticalJob.findMany({ where: { id: { in: rows.map((r) => r.id) } }, orderBy: { id: 'asc' } });
}

/** Finishes a job this worker still holds (its lease unchanged): false when another worker took it over meanwhile. */
export function finish(
  tx: Prisma.TransactionClient,
  job: VerticalJob,
  data: { status: 'succeeded' | 'failed'; result?: Prisma.InputJsonValue; error?: Prisma.InputJsonValue; inferenceIds: string[]; now: Date },
): Promise<boolean> {
  return releaseLease(tx, 'vertical_jobs', leaseOf(job), {
    where: { status: 'running' },
    data: {
      status: data.status,
      ...(data.result !== undefined ? { result: data.result } : {}),
      ...(data.error !== undefined ? { error: data.error } : {}),
      inferenceIds: data.inferenceIds,
      finishedAt: data.now,
      updatedAt: data.now,
    },
  });
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
  await releaseLease(db, 'vertical_jobs', leaseOf(job), {
    where: { status: 'running' },
    data: {
      status: 'queued',
      runAfter,
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
  const held = await updateLeased(db, 'vertical_jobs', leaseOf(job), { where: { status: 'running' }, data: { requestId, callStartedAt: now } });
  return held ? requestId : null;
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
