import type { Webhook } from '../generated/prisma/client.ts';
import {
  getWebhook,
  listWebhooks,
  sendTestEvent,
} from '../domain/webhooks/service.ts';
import { findDelivery } from '../domain/webhooks/store.ts';
import { SvcError } from '../errors/svc-error.ts';
import { CreateWebhook } from '../domain/webhooks/schema.ts';
import { builder } from './builder.ts';
import { inputTypeFrom, listFilters, serviceInput } from './inputs.ts';
import { relationConnection, relationPageArgs, serviceConnection } from './connections.ts';
import { createWebhook, disableWebhook, replayDelivery } from '../domain/governance/guarded.ts';

/** The event envelope (spec 2.4). */
export const WebhookEventRef = builder.prismaObject('Event', {
  name: 'WebhookEvent',
  fields: (t) => ({
    id: t.exposeID('id'),
    type: t.exposeString('type'),
    projectId: t.exposeID('projectId'),
    data: t.expose('data', { type: 'JSON' }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
  }),
});

export const WebhookAttemptRef = builder.prismaObject('WebhookAttempt', {
  fields: (t) => ({
    id: t.exposeID('id'),
    attempt: t.exposeInt('attempt', { description: '1 for the first attempt of the delivery.' }),
    attemptedAt: t.expose('attemptedAt', { type: 'UnixSeconds' }),
    responseStatus: t.exposeInt('responseStatus', { nullable: true, description: 'null: no response (timeout, refused).' }),
    durationMs: t.exposeInt('durationMs'),
    error: t.exposeString('error', { nullable: true }),
  }),
});

/** The delivery object of REST (CONTRACT §6), with its attempts and its event. */
export const WebhookDeliveryRef = builder.prismaObject('WebhookDelivery', {
  fields: (t) => ({
    id: t.exposeID('id'),
    webhookId: t.exposeID('webhookId'),
    eventId: t.exposeID('eventId'),
    eventType: t.exposeString('eventType'),
    status: t.exposeString('status', { description: 'pending, retrying, succeeded or failed.' }),
    attempts: t.exposeInt('attempts', { description: 'How many attempts were made (as REST).' }),
    lastAttemptAt: t.expose('lastAttemptAt', { type: 'UnixSeconds', nullable: true }),
    nextAttemptAt: t.expose('nextAttemptAt', { type: 'UnixSeconds', nullable: true }),
    responseStatus: t.exposeInt('responseStatus', { nullable: true }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    // Bounded by the retry schedule (six attempts by default), so a plain list rather than a connection.
    attemptLog: t.relation('attemptLog', {
      description: 'Every attempt of this delivery, first to last.',
      query: { orderBy: { attempt: 'asc' } },
    }),
    event: t.relation('event'),
    webhook: t.relation('webhook'),
  }),
});

export const WebhookRef = builder.prismaObject('Webhook', {
  fields: (t) => ({
    id: t.exposeID('id'),
    url: t.exposeString('url'),
    events: t.exposeStringList('events'),
    status: t.exposeString('status', { description: 'active or disabled.' }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    projectId: t.exposeID('projectId'),
    project: t.relation('project'),
    // Loaded with the webhook (one statement for every webhook of the page), newest first like every list.
    deliveries: t.connection(
      {
        type: WebhookDeliveryRef,
        authScopes: { action: 'webhook.delivery.list' },
        select: (args, _ctx, nestedSelection) => {
          const node = nestedSelection(true, ['edges', 'node']);
          const selection = (typeof node === 'object' && node !== null ? node : {}) as { select?: Record<string, unknown> };
          // Cursors are ids: selected even when no node field is asked for (`edges { cursor }`, `pageInfo` only),
          // which would otherwise leave Prisma an empty select.
          const withId = selection.select ? { ...selection, select: { ...selection.select, id: true } } : selection;
          return { deliveries: { ...withId, ...relationPageArgs(args) } };
        },
        resolve: (webhook, args) => relationConnection(webhook.deliveries, args),
      },
      { name: 'WebhookDeliveryConnection' },
      { name: 'WebhookDeliveryEdge' },
    ),
  }),
});

const CreateWebhookPayload = builder.objectRef<{ webhook: Webhook; secret: string }>('CreateWebhookPayload').implement({
  fields: (t) => ({
    webhook: t.field({ type: WebhookRef, resolve: (p) => p.webhook }),
    secret: t.exposeString('secret', { description: 'The signing secret (whsec_…), shown once.' }),
  }),
});

const CreateWebhookInput = inputTypeFrom('CreateWebhookInput', CreateWebhook);

builder.queryFields((t) => ({
  webhooks: t.connection(
    {
      type: WebhookRef,
      nullable: true,
      authScopes: { action: 'webhook.list' },
      description: 'Newest first, as GET /v1/webhooks.',
      args: { projectId: t.arg.id() },
      resolve: (_root, args, { ctx }) =>
        serviceConnection(args, (query) => listWebhooks(ctx, { ...query, ...listFilters(args) })),
    },
    { name: 'WebhookConnection' },
    { name: 'WebhookEdge' },
  ),
  webhook: t.field({
    type: WebhookRef,
    nullable: true,
    authScopes: { action: 'webhook.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getWebhook(ctx, String(args.id)),
  }),
  delivery: t.field({
    type: WebhookDeliveryRef,
    nullable: true,
    authScopes: { action: 'webhook.delivery.read' },
    description: 'One delivery of a webhook, with its attempts.',
    args: { webhookId: t.arg.id({ required: true }), id: t.arg.id({ required: true }) },
    resolve: async (_root, args, { ctx }) => {
      // The service finds the webhook in the caller's project (another project's looks absent); the store then
      // reads the delivery under that webhook and project.
      const webhook = await getWebhook(ctx, String(args.webhookId));
      const delivery = await findDelivery(ctx.db, webhook, String(args.id));
      if (!delivery) throw new SvcError('not_found', { param: 'delivery_id', message: 'No such delivery.' });
      return delivery;
    },
  }),
}));

builder.mutationFields((t) => ({
  createWebhook: t.field({
    type: CreateWebhookPayload,
    nullable: true,
    authScopes: { action: 'webhook.create' },
    description: 'HTTPS only; private addresses are refused unless allowlisted. Audits webhook.create.',
    args: { input: t.arg({ type: CreateWebhookInput, required: true }) },
    resolve: async (_root, { input }, { ctx, ports }) => {
      const webhook = await createWebhook(ports.webhooks, ctx, serviceInput(input));
      return { webhook, secret: webhook.secret! };
    },
  }),
  disableWebhook: t.field({
    type: WebhookRef,
    nullable: true,
    authScopes: { action: 'webhook.disable' },
    description: 'Disabling twice returns the same webhook; pending retries stop.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => disableWebhook(ctx, String(args.id)),
  }),
  replayDelivery: t.field({
    type: WebhookDeliveryRef,
    nullable: true,
    authScopes: { action: 'webhook.delivery.replay' },
    description: 'Only a failed delivery: a new delivery (new id) of the same event.',
    args: { webhookId: t.arg.id({ required: true }), deliveryId: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => replayDelivery(ctx, String(args.webhookId), String(args.deliveryId)),
  }),
  sendWebhookTestEvent: t.field({
    type: WebhookEventRef,
    nullable: true,
    authScopes: { action: 'webhook.test' },
    description:
      'Sends a webhook.test event to this webhook only, whatever it subscribes to, signed and retried like any delivery; ' +
      'a disabled webhook is refused. As POST /v1/webhooks/{webhook_id}/test.',
    args: { webhookId: t.arg.id({ required: true }) },
    resolve: async (_root, args, { ctx }) => (await sendTestEvent(ctx, String(args.webhookId))).event,
  }),
}));
