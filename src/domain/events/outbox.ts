import type { Prisma } from '../../generated/prisma/client.ts';
import type { Tx } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';
import { notifyDeliveryWorkers } from '../../webhooks/wakeups.ts';

/** The spec's event catalog (§6.2). */
export const EVENT_TYPES = [
  'inference.completed',
  'usage.daily_summary',
  'budget.threshold',
  'budget.exceeded',
  'key.rotated',
  'key.revoked',
  'policy.updated',
  'approval.approved',
  'approval.rejected',
  'eval.run.completed',
  'dev.review.completed',
  'dev.pull_request.summarized',
  'ops.incident.opened',
  'ops.incident.closed',
  'ops.slo.burn',
  'risk.case.closed',
  'risk.report.approved',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

const known = new Set<string>(EVENT_TYPES);
export const isEventType = (s: string): s is EventType => known.has(s);

/** An event to emit; `id` is chosen by the caller when a batch that may run twice must write it only once. */
export interface NewEvent {
  id?: string;
  projectId: string;
  type: EventType;
  data: Prisma.InputJsonObject;
  createdAt: Date;
}

/**
 * The one way to emit an event: writes the envelope row and one pending delivery per active webhook of the project
 * subscribed to the type, in the caller's transaction (a transactional outbox: no event without its change, and no
 * change without its event). The delivery worker picks the deliveries up.
 */
export async function enqueueEvent(
  tx: Tx,
  now: Date,
  projectId: string,
  type: EventType,
  data: Prisma.InputJsonObject,
): Promise<{ id: string }> {
  const id = newId('evt', now.getTime());
  await enqueueEvents(tx, [{ id, projectId, type, data, createdAt: now }]);
  return { id };
}

/** What enqueueEvents wrote. */
export interface WrittenEvents {
  events: number;
  deliveries: number;
}

/**
 * enqueueEvent for many events at once, in three statements whatever their number: the subscribed active webhooks of
 * their projects, then ONE statement inserting the events and a pending delivery per subscription, then the wake-up
 * (only when it made deliveries). The batch travels as JSON parameters that PostgreSQL unpacks (jsonb_to_recordset),
 * so its cost on the gateway is a JSON.stringify, not a parameter or a result row per event. An event whose id already
 * exists is skipped and gets no deliveries, so a batch written again (a write-ahead entry re-processed after a crash)
 * emits nothing twice.
 */
export async function enqueueEvents(tx: Tx, events: readonly NewEvent[]): Promise<WrittenEvents> {
  if (events.length === 0) return { events: 0, deliveries: 0 };
  const rows = events.map((e) => ({ ...e, id: e.id ?? newId('evt', e.createdAt.getTime()) }));
  const hooks = await tx.$queryRaw<{ id: string; project_id: string; events: string[] }[]>`
    SELECT id, project_id, events FROM webhooks
     WHERE project_id = ANY(${[...new Set(rows.map((e) => e.projectId))]}::text[]) AND status = 'active'
       AND events && ${[...new Set(rows.map((e) => e.type))]}::text[]
     ORDER BY id`;
  const deliveries: { id: string; webhook_id: string; event_id: string }[] = [];
  for (const e of rows) {
    for (const h of hooks) {
      if (h.project_id === e.projectId && h.events.includes(e.type)) {
        deliveries.push({ id: newId('del', e.createdAt.getTime()), webhook_id: h.id, event_id: e.id });
      }
    }
  }
  const payload = JSON.stringify(
    rows.map((e) => ({ id: e.id, project_id: e.projectId, type: e.type, data: e.data, created_at: e.createdAt.toISOString() })),
  );
  const [written] = await tx.$queryRaw<WrittenEvents[]>`
    WITH x AS (
      SELECT * FROM jsonb_to_recordset(${payload}::jsonb) AS x(id text, project_id text, type text, data jsonb, created_at timestamptz)
    ), e AS (
      INSERT INTO events (id, project_id, type, data, created_at)
      SELECT id, project_id, type, data, created_at FROM x
      ON CONFLICT (id) DO NOTHING
      RETURNING id, project_id, type, created_at
    ), d AS (
      INSERT INTO webhook_deliveries (id, webhook_id, event_id, project_id, event_type, status, attempts, next_attempt_at, created_at)
      SELECT dx.id, dx.webhook_id, e.id, e.project_id, e.type, 'pending', 0, e.created_at, e.created_at
        FROM jsonb_to_recordset(${JSON.stringify(deliveries)}::jsonb) AS dx(id text, webhook_id text, event_id text)
        JOIN e ON e.id = dx.event_id
      RETURNING 1
    )
    SELECT (SELECT count(*) FROM e)::int AS events, (SELECT count(*) FROM d)::int AS deliveries`;
  // Sent at commit (never on rollback): every replica's delivery worker wakes within milliseconds.
  if (written!.deliveries > 0) await notifyDeliveryWorkers(tx);
  return written!;
}
