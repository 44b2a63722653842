import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Event, Webhook, WebhookDelivery } from '../generated/prisma/client.ts';
import { unixOrNull, unixSeconds } from '../domain/context.ts';
import {
  getWebhook,
  listDeliveries,
  listWebhooks,
  sendTestEvent,
} from '../domain/webhooks/service.ts';
import { CreateWebhook, DeliveryParams, ListDeliveriesQuery, ListWebhooksQuery, WebhookIdParams } from '../domain/webhooks/schema.ts';
import { sendList } from './list.ts';
import { createWebhook, disableWebhook, replayDelivery } from '../domain/governance/guarded.ts';

/** The webhook object (spec 2.2, CONTRACT §6); the signing secret only on create. */
export function presentWebhook(webhook: Webhook, secret?: string) {
  return {
    id: webhook.id,
    object: 'svc.webhook' as const,
    url: webhook.url,
    events: webhook.events,
    status: webhook.status as 'active' | 'disabled',
    created_at: unixSeconds(webhook.createdAt),
    ...(secret !== undefined ? { secret } : {}),
  };
}

/** The delivery object (spec 2.3, CONTRACT §6). */
export function presentDelivery(delivery: WebhookDelivery) {
  return {
    id: delivery.id,
    object: 'svc.webhook.delivery' as const,
    webhook_id: delivery.webhookId,
    event_id: delivery.eventId,
    event_type: delivery.eventType,
    status: delivery.status as 'pending' | 'retrying' | 'succeeded' | 'failed',
    attempts: delivery.attempts,
    last_attempt_at: unixOrNull(delivery.lastAttemptAt),
    next_attempt_at: unixOrNull(delivery.nextAttemptAt),
    response_status: delivery.responseStatus,
    created_at: unixSeconds(delivery.createdAt),
  };
}

/** An event as its deliveries carry it: the envelope of spec 2.4 (src/domain/webhooks/envelope.ts), the same keys in the same order. */
export function presentEvent(event: Event) {
  return {
    id: event.id,
    object: 'svc.webhook.event' as const,
    type: event.type,
    created_at: unixSeconds(event.createdAt),
    project_id: event.projectId,
    data: event.data,
  };
}

export const webhooksRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/v1/webhooks', { schema: { body: CreateWebhook } }, async (req) => {
    const webhook = await createWebhook(app.ports.webhooks, req.ctx, req.body);
    return presentWebhook(webhook, webhook.secret);
  });

  app.get('/v1/webhooks', { schema: { querystring: ListWebhooksQuery } }, async (req, reply) =>
    sendList(reply, await listWebhooks(req.ctx, req.query), '/v1/webhooks', (w) => presentWebhook(w)),
  );

  app.get('/v1/webhooks/:webhook_id', { schema: { params: WebhookIdParams } }, async (req) =>
    presentWebhook(await getWebhook(req.ctx, req.params.webhook_id)),
  );

  app.post('/v1/webhooks/:webhook_id/disable', { schema: { params: WebhookIdParams } }, async (req) =>
    presentWebhook(await disableWebhook(req.ctx, req.params.webhook_id)),
  );

  app.get(
    '/v1/webhooks/:webhook_id/deliveries',
    { schema: { params: WebhookIdParams, querystring: ListDeliveriesQuery } },
    async (req, reply) =>
      sendList(
        reply,
        await listDeliveries(req.ctx, req.params.webhook_id, req.query),
        `/v1/webhooks/${req.params.webhook_id}/deliveries`,
        presentDelivery,
      ),
  );

  app.post('/v1/webhooks/:webhook_id/deliveries/:delivery_id/replay', { schema: { params: DeliveryParams } }, async (req) =>
    presentDelivery(await replayDelivery(req.ctx, req.params.webhook_id, req.params.delivery_id)),
  );

  // A webhook.test event to this webhook only (domain/webhooks/service.ts sendTestEvent): answers the event sent.
  app.post('/v1/webhooks/:webhook_id/test', { schema: { params: WebhookIdParams } }, async (req) =>
    presentEvent((await sendTestEvent(req.ctx, req.params.webhook_id)).event),
  );
};
