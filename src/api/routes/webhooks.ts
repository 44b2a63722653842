import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Event, Webhook, WebhookDelivery } from '../../generated/prisma/client.ts';
import { unixOrNull, unixSeconds } from '../../domain/context.ts';
import {
  getWebhook,
  listDeliveries,
  listWebhooks,
  sendTestEvent,
} from '../../domain/webhooks/service.ts';
import { CreateWebhook, DeliveryParams, ListDeliveriesQuery, ListWebhooksQuery, WebhookIdParams } from '../../domain/webhooks/schema.ts';
import { Nullable } from '../../domain/schema.ts';
import { ListOf, sendList } from '../list.ts';
import { UnixOrNull, Unix } from '../response-fields.ts';
import { createWebhook, disableWebhook, replayDelivery } from '../../domain/governance/guarded.ts';

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

/** presentWebhook's answer. */
export const WebhookObject = Type.Object(
  {
    id: Type.String({ description: 'The webhook id (wh_…).' }),
    object: Type.Literal('svc.webhook'),
    url: Type.String({ description: 'The HTTPS endpoint events are delivered to.' }),
    events: Type.Array(Type.String(), { description: 'The event types the webhook subscribes to.' }),
    status: Type.String({ description: 'active or disabled.' }),
    created_at: Unix('When the webhook was created'),
    secret: Type.Optional(Type.String({ description: 'The signing secret: only in the answer to the create (shown once).' })),
  },
  { description: 'A webhook (spec 2.2).' },
);

/** presentDelivery's answer. */
export const DeliveryObject = Type.Object(
  {
    id: Type.String({ description: 'The delivery id (del_…).' }),
    object: Type.Literal('svc.webhook.delivery'),
    webhook_id: Type.String({ description: 'The webhook it delivers to.' }),
    event_id: Type.String({ description: 'The event it delivers.' }),
    event_type: Type.String({ description: 'The event\'s type.' }),
    status: Type.String({ description: 'pending, retrying, succeeded or failed.' }),
    attempts: Type.Integer({ description: 'How many attempts were made.' }),
    last_attempt_at: UnixOrNull('When the last attempt was made'),
    next_attempt_at: UnixOrNull('When the next attempt is due'),
    response_status: Nullable(Type.Integer(), { description: 'The HTTP status of the last attempt, or null: no answer.' }),
    created_at: Unix('When the delivery was queued'),
  },
  { description: 'A webhook delivery (spec 2.3).' },
);

/** presentEvent's answer: the event envelope (spec 2.4). */
export const EventObject = Type.Object(
  {
    id: Type.String({ description: 'The event id (evt_…).' }),
    object: Type.Literal('svc.webhook.event'),
    type: Type.String({ description: 'The event type.' }),
    created_at: Unix('When the event happened'),
    project_id: Type.String({ description: 'The project it happened in.' }),
    data: Type.Unknown({ description: 'The event\'s payload, by type.' }),
  },
  { description: 'A webhook event (spec 2.4).' },
);

export const webhooksRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/v1/webhooks', { config: { action: 'webhook.create' }, schema: { body: CreateWebhook, response: { 200: WebhookObject } } }, async (req) => {
    const webhook = await createWebhook(app.ports.webhooks, req.ctx, req.body);
    return presentWebhook(webhook, webhook.secret);
  });

  app.get('/v1/webhooks', { config: { action: 'webhook.list' }, schema: { querystring: ListWebhooksQuery, response: { 200: ListOf(WebhookObject) } } }, async (req, reply) =>
    sendList(reply, await listWebhooks(req.ctx, req.query), '/v1/webhooks', (w) => presentWebhook(w)),
  );

  app.get('/v1/webhooks/:webhook_id', { config: { action: 'webhook.read' }, schema: { params: WebhookIdParams, response: { 200: WebhookObject } } }, async (req) =>
    presentWebhook(await getWebhook(req.ctx, req.params.webhook_id)),
  );

  app.post('/v1/webhooks/:webhook_id/disable', { config: { action: 'webhook.disable' }, schema: { params: WebhookIdParams, response: { 200: WebhookObject } } }, async (req) =>
    presentWebhook(await disableWebhook(req.ctx, req.params.webhook_id)),
  );

  app.get('/v1/webhooks/:webhook_id/deliveries',
    { config: { action: 'webhook.delivery.list' }, schema: { params: WebhookIdParams, querystring: ListDeliveriesQuery, response: { 200: ListOf(DeliveryObject) } } },
    async (req, reply) =>
      sendList(
        reply,
        await listDeliveries(req.ctx, req.params.webhook_id, req.query),
        `/v1/webhooks/${req.params.webhook_id}/deliveries`,
        presentDelivery,
      ),
  );

  app.post('/v1/webhooks/:webhook_id/deliveries/:delivery_id/replay', { config: { action: 'webhook.delivery.replay' }, schema: { params: DeliveryParams, response: { 200: DeliveryObject } } }, async (req) =>
    presentDelivery(await replayDelivery(req.ctx, req.params.webhook_id, req.params.delivery_id)),
  );

  // A webhook.test event to this webhook only (domain/webhooks/service.ts sendTestEvent): answers the event sent.
  app.post('/v1/webhooks/:webhook_id/test', { config: { action: 'webhook.test' }, schema: { params: WebhookIdParams, response: { 200: EventObject } } }, async (req) =>
    presentEvent((await sendTestEvent(req.ctx, req.params.webhook_id)).event),
  );
};
