import type { Event, Webhook, WebhookDelivery } from '../../generated/prisma/client.ts';
import { newId } from '../../db/ids.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import { EgressRefused } from '../../kernel/egress.ts';
import { generateSigningSecret } from './signing.ts';
import { notifyDeliveryWorkers } from './wakeups.ts';
import { recordAudit } from '../audit/service.ts';
import { enqueueEventToWebhook } from '../events/outbox.ts';
import type { Ctx } from '../context.ts';
import type { WebhookPorts } from './ports.ts';
import { paginate, type Page } from '../pagination.ts';
import { parseInput } from '../validation.ts';
import { CreateWebhook, ListDeliveriesQuery, ListWebhooksQuery } from './schema.ts';
import { addressed, requireProjectId, visibleProjectId } from '../tenancy.ts';
import * as store from './store.ts';

/** A webhook row with, on create only, its signing secret. */
export type WebhookWithSecret = Webhook & { secret?: string };

const webhookNotFound = () => new SvcError('not_found', { param: 'webhook_id', message: 'No such webhook.' });

/**
 * CONTRACT §6: HTTPS only, and no host that is or resolves to a private, loopback or link-local address unless
 * SVC_EGRESS_ALLOWLIST allows it. Checked again at every delivery.
 */
async function vetUrl(ports: WebhookPorts, url: string): Promise<string> {
  try {
    await ports.egress.vetUrl(url);
    return url; // stored as given: the response echoes what the caller sent
  } catch (err) {
    if (err instanceof EgressRefused) throw invalid('url', err.message);
    throw err;
  }
}

/** The scheme check alone (no DNS), so that a plain input error is reported before anything is looked up. */
function assertHttps(url: string): void {
  try {
    if (new URL(url).protocol !== 'https:') throw invalid('url', 'url must use https.');
  } catch (err) {
    if (err instanceof SvcError) throw err;
    throw invalid('url', 'url must be a valid absolute URL.');
  }
}

/**
 * Audits webhook.create. The signing secret is returned here only; it is stored encrypted (AES-256-GCM). A project
 * has at most SVC_MAX_WEBHOOKS_PER_PROJECT active webhooks (16 by default, Stripe's endpoint limit): one event fans out
 * to every subscribed webhook, so the cap bounds the connections one inference can cause. Disabled ones do not count.
 */
export async function createWebhook(ports: WebhookPorts, ctx: Ctx, raw: unknown): Promise<WebhookWithSecret> {
  const input = parseInput(CreateWebhook, raw);
  assertHttps(input.url);
  const events = [...new Set(input.events)];
  const projectId = await requireProjectId(ctx, input.project_id);
  const url = await vetUrl(ports, input.url);
  const secret = generateSigningSecret();
  const now = ctx.now();
  const id = newId('wh', now.getTime());
  const webhook = await ctx.db.$transaction(async (tx) => {
    await store.lockProject(tx, projectId);
    const max = ports.maxWebhooksPerProject;
    if ((await store.countActiveWebhooks(tx, projectId)) >= max) {
      // 400 invalid_request naming url (the spec has no quota code): the input is fine, this project may not add one.
      throw invalid(
        'url',
        `The project already has ${max} active webhooks, the most allowed (SVC_MAX_WEBHOOKS_PER_PROJECT); disable one first.`,
      );
    }
    const webhook = await store.insertWebhook(tx, {
      id,
      projectId,
      url,
      events,
      status: 'active',
      secretEncrypted: ports.secretBox.seal(secret, id),
      createdAt: now,
    });
    await recordAudit(tx, ctx, 'webhook.create', { projectId, targetId: id, data: { url, events } });
    return webhook;
  });
  return { ...webhook, secret };
}

export async function listWebhooks(ctx: Ctx, raw: unknown): Promise<Page<Webhook>> {
  const query = parseInput(ListWebhooksQuery, raw);
  const projectId = await visibleProjectId(ctx, query.project_id);
  return paginate(query, {
    cursorField: 'id',
    fetch: (args) => store.listWebhooks(ctx.db, projectId, args),
    exists: (id) => store.webhookExists(ctx.db, projectId, id),
  });
}

/** Another project's webhook looks absent (404), never forbidden. */
async function findVisibleWebhook(ctx: Ctx, webhookId: string): Promise<Webhook> {
  const projectId = await visibleProjectId(ctx, null);
  const webhook = await store.findInProject(ctx.db, projectId, webhookId);
  if (!webhook) throw webhookNotFound();
  addressed(ctx, webhook.projectId);
  return webhook;
}

export function getWebhook(ctx: Ctx, webhookId: string): Promise<Webhook> {
  return findVisibleWebhook(ctx, webhookId);
}

/**
 * Disabling twice returns the same webhook. No delivery is created for it afterwards, and its pending and retrying
 * deliveries are marked failed at once (they can be replayed if the endpoint comes back). Attempts already in flight
 * finish. Audits webhook.disable, on the first call only.
 */
export async function disableWebhook(ctx: Ctx, webhookId: string): Promise<Webhook> {
  const found = await findVisibleWebhook(ctx, webhookId);
  if (found.status === 'disabled') return found;
  return ctx.db.$transaction(async (tx) => {
    // Conditional: of two concurrent disables, one changes the row and audits; the other returns it.
    const disabled = await store.markDisabled(tx, found.id, ctx.now());
    if (!disabled) return (await store.findInProject(tx, found.projectId, found.id))!;
    const stopped = await store.failOpenDeliveries(tx, found.id);
    await recordAudit(tx, ctx, 'webhook.disable', {
      projectId: found.projectId,
      targetId: found.id,
      data: { deliveries_stopped: stopped },
    });
    return disabled;
  });
}

export async function listDeliveries(ctx: Ctx, webhookId: string, raw: unknown): Promise<Page<WebhookDelivery>> {
  const query = parseInput(ListDeliveriesQuery, raw);
  const webhook = await findVisibleWebhook(ctx, webhookId);
  return paginate(query, {
    cursorField: 'id',
    fetch: (args) => store.listDeliveries(ctx.db, webhook, args),
    exists: async (id) => (await store.findDelivery(ctx.db, webhook, id)) !== null,
  });
}

/**
 * Sends a failed delivery's event again as a new delivery (new `del_` id, same `evt_` id, a fresh retry schedule).
 * Only a failed delivery of an active webhook can be replayed. Audits webhook.delivery.replay.
 */
export async function replayDelivery(ctx: Ctx, webhookId: string, deliveryId: string): Promise<WebhookDelivery> {
  const webhook = await findVisibleWebhook(ctx, webhookId);
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const original = await store.findDelivery(tx, webhook, deliveryId);
    if (!original) throw new SvcError('not_found', { param: 'delivery_id', message: 'No such delivery.' });
    if (original.status !== 'failed') {
      throw invalid('delivery_id', `Only a failed delivery can be replayed; this one is ${original.status}.`);
    }
    const current = await store.findInProject(tx, webhook.projectId, webhook.id);
    if (current?.status !== 'active') throw invalid('webhook_id', 'A disabled webhook cannot receive deliveries.');
    const replay = await store.insertDelivery(tx, {
      id: newId('del', now.getTime()),
      webhookId: webhook.id,
      eventId: original.eventId,
      projectId: webhook.projectId,
      eventType: original.eventType,
      status: 'pending',
      nextAttemptAt: now,
      createdAt: now,
    });
    await recordAudit(tx, ctx, 'webhook.delivery.replay', {
      projectId: webhook.projectId,
      targetId: replay.id,
      data: { webhook_id: webhook.id, replayed_delivery_id: original.id, event_id: original.eventId },
    });
    await notifyDeliveryWorkers(tx);
    return replay;
  });
}

/** What a `webhook.test` event says (its `data.message`). */
export const TEST_EVENT_MESSAGE = 'A test event sent on request from svc; it reports nothing that happened.';

/**
 * Sends a `webhook.test` event to this one webhook (not to the project's other webhooks, and whatever it subscribes
 * to), through the outbox like every event: a new `evt_` event and one pending delivery, signed and retried as usual,
 * listed among its deliveries. `data`: `{webhook_id, message}`. A disabled webhook receives nothing, as for a replay:
 * 400 invalid_request `param: "webhook_id"`. Changes nothing else, so it is neither audited nor under dual control.
 */
export async function sendTestEvent(ctx: Ctx, webhookId: string): Promise<{ event: Event; deliveryId: string }> {
  const webhook = await findVisibleWebhook(ctx, webhookId);
  if (webhook.status !== 'active') throw invalid('webhook_id', 'A disabled webhook cannot receive deliveries.');
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    // Read again in the transaction: a disable that committed meanwhile wins.
    const current = await store.findInProject(tx, webhook.projectId, webhook.id);
    if (current?.status !== 'active') throw invalid('webhook_id', 'A disabled webhook cannot receive deliveries.');
    return enqueueEventToWebhook(tx, now, webhook, 'webhook.test', { webhook_id: webhook.id, message: TEST_EVENT_MESSAGE });
  });
}
