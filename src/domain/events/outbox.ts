import type { Prisma, Event } from '../../generated/prisma/client.ts';
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
): Promise<Event> {
  const event = await tx.event.create({
    data: { id: newId('evt', now.getTime()), projectId, type, data, createdAt: now },
  });
  const hooks = await tx.webhook.findMany({
    where: { projectId, status: 'active', events: { has: type } },
    select: { id: true },
  });
  if (hooks.length > 0) {
    await tx.webhookDelivery.createMany({
      data: hooks.map((h) => ({
        id: newId('del', now.getTime()),
        webhookId: h.id,
        eventId: event.id,
        projectId,
        eventType: type,
        status: 'pending',
        nextAttemptAt: now,
        createdAt: now,
      })),
    });
    // Sent at commit (never on rollback): every replica's delivery worker wakes within milliseconds.
    await notifyDeliveryWorkers(tx);
  }
  return event;
}
