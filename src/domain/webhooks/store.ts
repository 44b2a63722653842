import type { Prisma, Webhook, WebhookDelivery } from '../../generated/prisma/client.ts';
import type { Tx } from '../../db/client.ts';

/** Deliveries that may still be attempted. */
export const OPEN_DELIVERY_STATUSES = ['pending', 'retrying'];

/** `projectId` undefined: the operator without a project filter (sees every project). */
const inProject = (projectId: string | undefined): Prisma.WebhookWhereInput => (projectId !== undefined ? { projectId } : {});

export function findInProject(tx: Tx, projectId: string | undefined, webhookId: string): Promise<Webhook | null> {
  return tx.webhook.findFirst({ where: { ...inProject(projectId), id: webhookId } });
}

/**
 * Holds the project's row until the transaction ends, so that creates in one project run one after the other: the
 * count of active webhooks a create checks stays true until it inserts (two racing creates cannot both pass the cap).
 */
export async function lockProject(tx: Tx, projectId: string): Promise<void> {
  await tx.$queryRaw`SELECT id FROM projects WHERE id = ${projectId} FOR UPDATE`;
}

export function countActiveWebhooks(tx: Tx, projectId: string): Promise<number> {
  return tx.webhook.count({ where: { projectId, status: 'active' } });
}

export function insertWebhook(tx: Tx, data: Prisma.WebhookUncheckedCreateInput): Promise<Webhook> {
  return tx.webhook.create({ data });
}

/** Null when the webhook was not active (already disabled). */
export async function markDisabled(tx: Tx, webhookId: string, now: Date): Promise<Webhook | null> {
  const res = await tx.webhook.updateMany({ where: { id: webhookId, status: 'active' }, data: { status: 'disabled', disabledAt: now } });
  return res.count === 1 ? tx.webhook.findUnique({ where: { id: webhookId } }) : null;
}

/** Pending and retrying deliveries of the webhook become failed: nothing more is sent for them. */
export async function failOpenDeliveries(tx: Tx, webhookId: string): Promise<number> {
  const res = await tx.webhookDelivery.updateMany({
    where: { webhookId, status: { in: OPEN_DELIVERY_STATUSES } },
    data: { status: 'failed', nextAttemptAt: null, leaseUntil: null },
  });
  return res.count;
}

export function listWebhooks(
  tx: Tx,
  projectId: string | undefined,
  args: { cursor?: { lt: string } | { gt: string }; order: 'asc' | 'desc'; take: number },
): Promise<Webhook[]> {
  return tx.webhook.findMany({
    where: { ...inProject(projectId), ...(args.cursor ? { id: args.cursor } : {}) },
    orderBy: { id: args.order },
    take: args.take,
  });
}

export async function webhookExists(tx: Tx, projectId: string | undefined, webhookId: string): Promise<boolean> {
  return (await tx.webhook.count({ where: { ...inProject(projectId), id: webhookId } })) > 0;
}

/** Deliveries of one webhook; the caller has already found the webhook in the caller's project. */
export function listDeliveries(
  tx: Tx,
  webhook: Pick<Webhook, 'id' | 'projectId'>,
  args: { cursor?: { lt: string } | { gt: string }; order: 'asc' | 'desc'; take: number },
): Promise<WebhookDelivery[]> {
  return tx.webhookDelivery.findMany({
    where: { projectId: webhook.projectId, webhookId: webhook.id, ...(args.cursor ? { id: args.cursor } : {}) },
    orderBy: { id: args.order },
    take: args.take,
  });
}

export function findDelivery(tx: Tx, webhook: Pick<Webhook, 'id' | 'projectId'>, deliveryId: string): Promise<WebhookDelivery | null> {
  return tx.webhookDelivery.findFirst({ where: { projectId: webhook.projectId, webhookId: webhook.id, id: deliveryId } });
}

export function insertDelivery(tx: Tx, data: Prisma.WebhookDeliveryUncheckedCreateInput): Promise<WebhookDelivery> {
  return tx.webhookDelivery.create({ data });
}
