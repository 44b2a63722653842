import { Prisma } from '../../generated/prisma/client.ts';
import type { Db } from '../../db/client.ts';
import { claimLeases, releaseUnworked } from '../../db/leases.ts';
import type { LeasedDelivery } from '../../domain/events/outbox.ts';

/** A delivery this worker holds the lease of: claimed here, or handed over leased by the outcome writer. */
export type Claimed = LeasedDelivery;

/**
 * Leases up to `limit` due deliveries to this worker until now + leaseMs, in one statement (db/leases.ts): a row
 * claimed by one replica is invisible to the others until its attempt is recorded or the lease expires (a crashed
 * worker's attempt is then retried). Unlike the other leased rows, a delivery's claim returns everything an attempt
 * needs (its webhook's URL and sealed secret, its event) from the same statement, in the order they came due.
 */
export function claimDeliveries(db: Db, now: Date, leaseMs: number, limit: number): Promise<Claimed[]> {
  return claimLeases<Claimed>(db, 'webhook_deliveries', {
    now,
    until: new Date(now.getTime() + leaseMs),
    limit,
    due: Prisma.sql`d.status IN ('pending', 'retrying') AND d.next_attempt_at <= ${now}`,
    orderBy: Prisma.sql`d.next_attempt_at, d.id`,
    join: { tables: Prisma.sql`webhooks w, events e`, on: Prisma.sql`w.id = u.webhook_id AND e.id = u.event_id` },
    returning: Prisma.sql`u.id, u.webhook_id AS "webhookId", w.status AS "webhookStatus", u.project_id AS "projectId", w.url,
      w.secret_encrypted AS "secretEncrypted", e.id AS "eventId", e.type, e.data::text AS "dataJson",
      e.created_at AS "eventCreatedAt", u.first_attempt_at AS "firstAttemptAt"`,
  });
}

/**
 * Handed over but never sent (this worker stops): given back due now (their next_attempt_at was the lease's end), for
 * any worker to claim at once. Only those still unattempted.
 */
export function releaseUnsent(db: Db, ids: string[], now: Date): Promise<number> {
  return releaseUnworked(db, 'webhook_deliveries', ids, { where: { attempts: 0, status: 'pending' }, data: { nextAttemptAt: now } });
}

/**
 * Handed-over deliveries waiting for a slot, at most: beyond it the writer leaves new deliveries unleased for any
 * replica to claim, so that none waits here until its lease runs out (which would let another worker send it too).
 */
export const MAX_HANDED_OVER = 2_000;

/**
 * The lease a batch writer gives the deliveries it hands to this worker, or null (not running, or too many already
 * waiting here) to write them unleased for any replica to claim.
 */
export function handoffLease(running: boolean, waiting: number, count: number, now: Date, leaseMs: number): Date | null {
  if (!running || waiting + count > MAX_HANDED_OVER) return null;
  return new Date(now.getTime() + leaseMs);
}
