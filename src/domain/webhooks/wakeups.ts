import type { RawSql } from '../../db/sql.ts';

/** One channel for the whole database; the payload names the schema, so test schemas sharing a database stay apart. */
export const WAKE_CHANNEL = 'svc_webhooks';

/**
 * Tells every replica's delivery worker that deliveries are due. NOTIFY is transactional: it is sent when the caller's
 * transaction commits and never when it rolls back, so a worker cannot wake before the rows it would claim are visible.
 * The listening side is the worker's (src/jobs/webhook-delivery/wakeup-listener.ts).
 */
export async function notifyDeliveryWorkers(tx: RawSql): Promise<void> {
  await tx.$executeRaw`SELECT pg_notify(${WAKE_CHANNEL}, current_schema())`;
}
