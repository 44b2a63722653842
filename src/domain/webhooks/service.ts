import type { Event, Webhook, WebhookDelivery } from '../../generated/prisma/client.ts';
import { newId } from '../../db/ids.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import { EgressRefused } from '../../kernel/egress.ts';
import { generateSigningSecret } from './signing.ts';
import { notifyDeliveryWorkers } from './wakeups.ts';
import { recordAudit } from '../audit/service.ts';
import { enqueueEventToWebhook } from '../events/outbox.ts';
import { ownTransaction, addressed, requireProjectId, visibleProjectId, type Ctx, type Checked } from '../context.ts';
import type { WebhookPorts } from './ports.ts';
import { paginate, type Page } from '../pagination.ts';
import { parseInput } from '../validation.ts';
import { CreateWebhook, ListDeliveriesQuery, ListWebhooksQuery } from './schema.ts';
import * as store from './store.ts';
import type { Tx } from '../../db/client.ts';

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

export interface NewWebhook extends Checked {
  url: string;
  events: string[];
}

/** A project has at most SVC_MAX_WEBHOOKS_PER_PROJECT active webhooks; `db` is the open transaction when there is one. */
async function assertUnderCap(ports: WebhookPorts, db: Tx, projectId: string): Promise<void> {
  const max = ports.maxWebhooksPerProject;
  if ((await store.countActiveWebhooks(db, projectId)) >= max) {
    // 400 invalid_request naming url (the spec has no quota code): the input is fine, this project may not add one.
    throw invalid('url', `The project already has ${max} active webhooks, the most allowed (SVC_MAX_WEBHOOKS_PER_PROJECT); disable one first.`);
  }
}

/** createWebhook's validation (the input, the url's scheme and address, the project, the cap), writing nothing. */
export async function checkCreateWebhook(ports: WebhookPorts, ctx: Ctx, raw: unknown): Promise<NewWebhook> {
  const input = parseInput(CreateWebhook, raw);
  assertHttps(input.url);
  const events = [...new Set(input.events)];
  const projectId = await requireProjectId(ctx, input.project_id);
  const url = await vetUrl(ports, input.url);
  await assertUnderCap(ports, ctx.db, projectId);
  return { projectId, url, events };
}

/** createWebhook's change, as checkCreateWebhook validated it: the cap is checked again under the project's lock. */
export async function applyCreateWebhook(ports: WebhookPorts, ctx: Ctx, checked: NewWebhook, transact = ownTransaction(ctx)): Promise<WebhookWithSecret> {
  const { projectId, url, events } = checked;
  const secret = generateSigningSecret();
  const now = ctx.now();
  const id = newId('wh', now.getTime());
  const webhook = await transact(async (tx) => {
    await store.lockProject(tx, projectId);
    await assertUnderCap(ports, tx, projectId);
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

/**
 * Audits webhook.create. The signing secret is returned here only; it is stored encrypted (AES-256-GCM). A project
 * has at most SVC_MAX_WEBHOOKS_PER_PROJECT active webhooks (16 by default, Stripe's endpoint limit): one event fans out
 * to every subscribed webhook, so the cap bounds the connections one inference can cause. Disabled ones do not count.
 */
export async function createWebhook(ports: WebhookPorts, ctx: Ctx, raw: unknown): Promise<WebhookWithSecret> {
  return applyCreateWebhook(ports, ctx, await checkCreateWebhook(ports, ctx, raw));
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

export interface WebhookDisabling extends Checked {
  webhook: Webhook;
}

/** disableWebhook's validation (the webhook is visible), writing nothing. */
export async function checkDisableWebhook(ctx: Ctx, webhookId: string): Promise<WebhookDisabling> {
  const webhook = await findVisibleWebhook(ctx, webhookId);
  return { projectId: webhook.projectId, webhook };
}

/** disableWebhook's change, as checkDisableWebhook found the webhook; one already disabled opens no transaction. */
export async function applyDisableWebhook(ctx: Ctx, { webhook: found }: WebhookDisabling, transact = ownTransaction(ctx)): Promise<Webhook> {
  if (found.status === 'disabled') return found;
  return transact(async (tx) => {
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

/**
 * Disabling twice returns the same webhook. No delivery is created for it afterwards, and its pending and retrying
 * deliveries are marked failed at once (they can be replayed if the endpoint comes back). Attempts already in flight
 * finish. Audits webhook.disable, on the first call only.
 */
export async function disableWebhook(ctx: Ctx, webhookId: string): Promise<Webhook> {
  return applyDisableWebhook(ctx, await checkDisableWebhook(ctx, webhookId));
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

export interface DeliveryReplay extends Checked {
  webhook: Webhook;
  deliveryId: string;
}

/** Only a failed delivery of an active webhook can be replayed; `db` is the open transaction when there is one. */
async function replayable(db: Tx, webhook: Webhook, deliveryId: string): Promise<WebhookDelivery> {
  const original = await store.findDelivery(db, webhook, deliveryId);
  if (!original) throw new SvcError('not_found', { param: 'delivery_id', message: 'No such delivery.' });
  if (original.status !== 'failed') {
    throw invalid('delivery_id', `Only a failed delivery can be replayed; this one is ${original.status}.`);
  }
  const current = await store.findInProject(db, webhook.projectId, webhook.id);
  if (current?.status !== 'active') throw invalid('webhook_id', 'A disabled webhook cannot receive deliveries.');
  return original;
}

/** replayDelivery's validation (the webhook and delivery are visible, the delivery failed, the webhook is active). */
export async function checkReplayDelivery(ctx: Ctx, webhookId: string, deliveryId: string): Promise<DeliveryReplay> {
  const webhook = await findVisibleWebhook(ctx, webhookId);
  await replayable(ctx.db, webhook, deliveryId);
  return { projectId: webhook.projectId, webhook, deliveryId };
}

/** replayDelivery's change, as checkReplayDelivery validated it (checked again in its transaction). */
export async function applyReplayDelivery(ctx: Ctx, { webhook, deliveryId }: DeliveryReplay, transact = ownTransaction(ctx)): Promise<WebhookDelivery> {
  const now = ctx.now();
  return transact(async (tx) => {
    const original = await replayable(tx, webhook, deliveryId);
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

/**
 * Sends a failed delivery's event again as a new delivery (new `del_` id, same `evt_` id, a fresh retry schedule).
 * Only a failed delivery of an active webhook can be replayed. Audits webhook.delivery.replay.
 */
export async function replayDelivery(ctx: Ctx, webhookId: string, deliveryId: string): Promise<WebhookDelivery> {
  return applyReplayDelivery(ctx, await checkReplayDelivery(ctx, webhookId, deliveryId));
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
