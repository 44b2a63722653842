import { createHash } from 'node:crypto';
import type { RawSql } from '../../db/sql.ts';

/**
 * The wake-up channel every delivery worker of the database listens to; the payload names the schema, so test schemas
 * sharing a database stay apart. Used when no worker advertises itself (the embedded database, a worker that could not
 * set its name): then every worker of the schema wakes.
 */
export const WAKE_CHANNEL = 'svc_webhooks';

/** A listening worker's own channel: its direct session's backend process id, unique in the cluster while it lives. */
export const workerChannel = (pid: number): string => `${WAKE_CHANNEL}_${pid}`;

/**
 * The application_name a listening worker's direct session carries, which the notifier finds in pg_stat_activity:
 * the schema's md5 (16 hex digits), so that any schema name fits PostgreSQL's 63 bytes. The SQL below builds the same.
 */
export const workerTag = (schema: string): string => `svc-deliveries:${createHash('md5').update(schema).digest('hex').slice(0, 16)}`;

/**
 * Tells one delivery worker that deliveries are due: a worker picked at random among those listening on this schema
 * (their sessions in pg_stat_activity), on its own channel, so an event wakes one worker, not every replica's
 * (SKIP LOCKED kept two from claiming the same row, but every worker ran a claim for every event). With none found,
 * the schema's common channel wakes whoever listens. A worker woken while all its slots are busy claims when one
 * frees; a worker that died between the pick and the commit misses it, and the others' poll (10 s) delivers it.
 *
 * NOTIFY is transactional: it is sent when the caller's transaction commits and never when it rolls back, so a worker
 * cannot wake before the rows it would claim are visible. The listening side is the worker's
 * (src/jobs/webhook-delivery/wakeup-listener.ts).
 */
export async function notifyDeliveryWorkers(tx: RawSql): Promise<void> {
  await tx.$executeRaw`SELECT pg_notify(
    coalesce((SELECT ${WAKE_CHANNEL} || '_' || pid FROM pg_stat_activity
               WHERE application_name = 'svc-deliveries:' || left(md5(current_schema()), 16)
               ORDER BY random() LIMIT 1), ${WAKE_CHANNEL}),
    current_schema())`;
}
