import type { Db } from '../../db/client.ts';
import type { LeasedDelivery } from '../../domain/events/outbox.ts';
import { claimDue } from './store.ts';

/** A delivery this worker holds the lease of: claimed here, or handed over leased by the outcome writer. */
export type Claimed = LeasedDelivery;

/**
 * Leases up to `limit` due deliveries to this worker until now + leaseMs, in one statement (store.ts, claimDue): a row
 * claimed by one replica is invisible to the others until its attempt is recorded or the lease expires (a crashed
 * worker's attempt is then retried).
 */
export function claimDeliveries(db: Db, now: Date, leaseMs: number, limit: number): Promise<Claimed[]> {
  return claimDue(db, now, new Date(now.getTime() + leaseMs), limit);
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
