import type { Prisma } from '../../generated/prisma/client.ts';
import type { Db } from '../../db/client.ts';
import { PLAN_LIMITS } from '../rate-limits/service.ts';

type Reader = (db: Db, projectId: string, params: Record<string, string>) => Promise<Prisma.InputJsonObject | null>;

const usd = (micros: bigint | null) => (micros === null ? null : Number(micros) / 1_000_000);

/**
 * The guarded resource as it is when a change is queued, in the API's field names, so that an approver sees a
 * before/after diff (the approval's `before`; `request` is the after). A create has no before (null).
 */
const READERS: Record<string, Reader> = {
  'rate_limits.update': async (db, projectId) => {
    const p = await db.project.findUnique({ where: { id: projectId } });
    if (!p) return null;
    const plan = PLAN_LIMITS[p.plan] ?? PLAN_LIMITS.starter!;
    return {
      requests_per_minute: p.requestsPerMinute ?? plan.requestsPerMinute,
      tokens_per_minute: p.tokensPerMinute ?? plan.tokensPerMinute,
      burst: p.burst ?? plan.burst,
    };
  },
  'budget.update': async (db, projectId) => {
    const p = await db.project.findUnique({ where: { id: projectId }, select: { budgetMicros: true } });
    return p ? { budget_usd: usd(p.budgetMicros) } : null;
  },
  'residency.update': async (db, projectId) => {
    const p = await db.project.findUnique({ where: { id: projectId }, select: { region: true } });
    return p ? { region: p.region } : null;
  },
  'pii.update': async (db, projectId) => {
    const p = await db.project.findUnique({ where: { id: projectId }, select: { privacy: { select: { piiRedact: true } } } });
    return p ? { redact: p.privacy?.piiRedact ?? false } : null;
  },
  'retention.update': async (db, projectId) => {
    const p = await db.project.findUnique({ where: { id: projectId }, select: { privacy: { select: { retentionMode: true, retentionDays: true } } } });
    return p ? { mode: p.privacy?.retentionMode ?? 'standard', days: p.privacy?.retentionDays ?? 30 } : null;
  },
  'governance.update': async (db, projectId) => {
    const p = await db.project.findUnique({ where: { id: projectId }, select: { dualControl: true } });
    return p ? { dual_control: p.dualControl } : null;
  },
  // The report as the approver judges it (CONTRACT §16): its status and drafted content.
  'risk_report.approve': async (db, projectId, params) => {
    const r = await db.riskDraft.findFirst({ where: { id: params.report_id, projectId, kind: 'report' } });
    return r ? { case_id: r.caseId, status: r.status, content: (r.content ?? null) as Prisma.InputJsonValue } : null;
  },
  'routing_policy.update': (db, projectId, params) => policy(db, projectId, params.policy_id),
  'routing_policy.delete': (db, projectId, params) => policy(db, projectId, params.policy_id),
  'key.rotate': (db, projectId, params) => key(db, projectId, params.key_id),
  'key.revoke': (db, projectId, params) => key(db, projectId, params.key_id),
  'key.update': (db, projectId, params) => key(db, projectId, params.key_id),
  'webhook.disable': async (db, projectId, params) => {
    const w = await db.webhook.findFirst({ where: { id: params.webhook_id, projectId } });
    return w ? { url: w.url, events: w.events, status: w.status } : null;
  },
  'webhook.delivery.replay': async (db, projectId, params) => {
    const d = await db.webhookDelivery.findFirst({ where: { id: params.delivery_id, webhookId: params.webhook_id, projectId } });
    return d ? { delivery_id: d.id, event_id: d.eventId, status: d.status } : null;
  },
};

async function policy(db: Db, projectId: string, policyId: string | undefined): Promise<Prisma.InputJsonObject | null> {
  const p = await db.routingPolicy.findFirst({ where: { id: policyId, projectId } });
  if (!p) return null;
  return { name: p.name, strategy: p.strategy, targets: p.targets as Prisma.InputJsonValue, cache_ttl_s: p.cacheTtlS, is_default: p.isDefault };
}

async function key(db: Db, projectId: string, keyId: string | undefined): Promise<Prisma.InputJsonObject | null> {
  const k = await db.apiKey.findFirst({ where: { id: keyId, projectId } });
  return k ? { name: k.name, scopes: k.scopes, status: k.status, budget_usd: usd(k.budgetMicros), expires_at: k.expiresAt ? Math.floor(k.expiresAt.getTime() / 1000) : null } : null;
}

export async function snapshotBefore(db: Db, action: string, projectId: string, params: Record<string, string>): Promise<Prisma.InputJsonObject | null> {
  const read = READERS[action];
  return read ? read(db, projectId, params) : null;
}
