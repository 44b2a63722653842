import type { Event, Prisma } from '../../generated/prisma/client.ts';
import type { Tx } from '../../db/client.ts';
import type { RawSql } from '../../db/sql.ts';
import { newId } from '../../db/ids.ts';
import { notifyDeliveryWorkers } from '../webhooks/wakeups.ts';

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
  // CONTRACT §20, beyond the spec's catalog: a tool call through the MCP gateway reached its server.
  'mcp.tool.called',
  // CONTRACT §21, beyond the spec's catalog: a batch ended (completed, failed, expired or cancelled).
  'batch.completed',
  // Sent on request to one webhook (POST /v1/webhooks/{id}/test), never fanned out: see enqueueEventToWebhook.
  'webhook.test',
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

/**
 * enqueueEvent addressed to ONE webhook, whatever it subscribes to (`webhook.test`, sent on request): the envelope
 * row and a single pending delivery for that webhook, in the caller's transaction; no other webhook of the project
 * gets it. The delivery worker sends and signs it like any other. The caller has found the webhook in the caller's
 * project and checked that it is active.
 */
export async function enqueueEventToWebhook(
  tx: Tx,
  now: Date,
  webhook: { id: string; projectId: string },
  type: EventType,
  data: Prisma.InputJsonObject,
): Promise<{ event: Event; deliveryId: string }> {
  const event = await tx.event.create({ data: { id: newId('evt', now.getTime()), projectId: webhook.projectId, type, data, createdAt: now } });
  const deliveryId = newId('del', now.getTime());
  await tx.webhookDelivery.create({
    data: {
      id: deliveryId,
      webhookId: webhook.id,
      eventId: event.id,
      projectId: webhook.projectId,
      eventType: type,
      status: 'pending',
      nextAttemptAt: now,
      createdAt: now,
    },
  });
  await notifyDeliveryWorkers(tx);
  return { event, deliveryId };
}

/** What enqueueEvents wrote. */
export interface WrittenEvents {
  events: number;
  deliveries: number;
  /** With `leaseUntil`: the deliveries written, already leased to the caller, with what an attempt needs. */
  leased: LeasedDelivery[];
}

/** A delivery as the delivery worker sends it: the delivery, its webhook and its event (data as PostgreSQL's jsonb text). */
export interface LeasedDelivery {
  id: string;
  webhookId: string;
  webhookStatus: string;
  projectId: string;
  url: string;
  secretEncrypted: string;
  eventId: string;
  type: string;
  dataJson: string;
  eventCreatedAt: Date;
  /** Set from the second attempt on (claimed retries); a new delivery handed over has had none. */
  firstAttemptAt?: Date | null;
}

/**
 * enqueueEvent for many events at once, in three statements whatever their number: the subscribed active webhooks of
 * their projects, then ONE statement inserting the events and a pending delivery per subscription, then the wake-up
 * (only when it made deliveries). The batch travels as JSON parameters that PostgreSQL unpacks (jsonb_to_recordset),
 * so its cost on the gateway is a JSON.stringify, not a parameter or a result row per event. An event whose id already
 * exists is skipped and gets no deliveries, so a batch written again (a write-ahead entry re-processed after a crash)
 * emits nothing twice.
 *
 * `leaseUntil` (the outcome writer, when this process's delivery worker runs): the deliveries are written already
 * claimed by the caller until then, returned in `leased`, and nobody is woken: the caller hands them to its own worker
 * once committed, which saves every replica a claim statement per batch. Their next_attempt_at is the lease's end
 * (when another worker would attempt them), which also keeps them out of the claim statement's index range. Should
 * this process die first, the lease runs out and any replica's worker claims them as usual (at-least-once either way).
 */
export async function enqueueEvents(tx: RawSql, events: readonly NewEvent[], opts: { leaseUntil?: Date } = {}): Promise<WrittenEvents> {
  if (events.length === 0) return { events: 0, deliveries: 0, leased: [] };
  const leaseUntil = opts.leaseUntil ?? null;
  const rows = events.map((e) => ({ ...e, id: e.id ?? newId('evt', e.createdAt.getTime()) }));
  const hooks = await tx.$queryRaw<{ id: string; project_id: string; events: string[]; url: string; secret_encrypted: string }[]>`
    SELECT id, project_id, events, url, secret_encrypted FROM webhooks
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
  // The leased deliveries come back as one JSON value ([id, event id, data], data as jsonb prints it: the same text
  // the claim statement reads, so a retry sends the same bytes), not as a result row each.
  const [written] = await tx.$queryRaw<{ events: number; deliveries: number; leased: [string, string, unknown][] | null }[]>`
    WITH x AS (
      SELECT * FROM jsonb_to_recordset(${payload}::jsonb) AS x(id text, project_id text, type text, data jsonb, created_at timestamptz)
    ), e AS (
      INSERT INTO events (id, project_id, type, data, created_at)
      SELECT id, project_id, type, data, created_at FROM x
      ON CONFLICT (id, created_at) DO NOTHING -- the key of the partitioned table; an id is always written with one created_at
      RETURNING id, project_id, type, data, created_at
    ), d AS (
      INSERT INTO webhook_deliveries (id, webhook_id, event_id, project_id, event_type, status, attempts, next_attempt_at, lease_until, created_at)
      SELECT dx.id, dx.webhook_id, e.id, e.project_id, e.type, 'pending', 0, COALESCE(${leaseUntil}::timestamptz, e.created_at),
             ${leaseUntil}::timestamptz, e.created_at
        FROM jsonb_to_recordset(${JSON.stringify(deliveries)}::jsonb) AS dx(id text, webhook_id text, event_id text)
        JOIN e ON e.id = dx.event_id
      RETURNING id, event_id
    )
    SELECT (SELECT count(*) FROM e)::int AS events, (SELECT count(*) FROM d)::int AS deliveries,
      CASE WHEN ${leaseUntil}::timestamptz IS NULL THEN NULL
        ELSE (SELECT json_agg(json_build_array(d.id, d.event_id, e.data)) FROM d JOIN e ON e.id = d.event_id) END AS leased`;
  const leased: LeasedDelivery[] = [];
  // The adapter may hand json back as text.
  const leasedRows = typeof written!.leased === 'string' ? (JSON.parse(written!.leased) as [string, string, unknown][]) : written!.leased;
  if (leaseUntil && leasedRows) {
    const byDelivery = new Map(deliveries.map((d) => [d.id, d]));
    const hookById = new Map(hooks.map((h) => [h.id, h]));
    const eventById = new Map(rows.map((e) => [e.id, e]));
    for (const [id, eventId, data] of leasedRows) {
      const hook = hookById.get(byDelivery.get(id)!.webhook_id)!;
      const event = eventById.get(eventId)!;
      leased.push({
        id,
        webhookId: hook.id,
        webhookStatus: 'active',
        projectId: event.projectId,
        url: hook.url,
        secretEncrypted: hook.secret_encrypted,
        eventId,
        type: event.type,
        dataJson: JSON.stringify(data),
        eventCreatedAt: event.createdAt,
      });
    }
  }
  // Sent at commit (never on rollback): every replica's delivery worker wakes within milliseconds. Leased deliveries
  // need no wake-up: their writer sends them.
  if (written!.deliveries > leased.length) await notifyDeliveryWorkers(tx);
  return { events: written!.events, deliveries: written!.deliveries, leased };
}
