import type { Event } from '../../generated/prisma/client.ts';

/** The event envelope of spec 2.4, as the exact bytes a receiver gets (the same on every retry of a delivery). */
export function eventEnvelopeJson(event: Pick<Event, 'id' | 'type' | 'createdAt' | 'projectId' | 'data'>): string {
  return JSON.stringify({
    id: event.id,
    object: 'svc.webhook.event',
    type: event.type,
    created_at: Math.floor(event.createdAt.getTime() / 1000),
    project_id: event.projectId,
    data: event.data,
  });
}
