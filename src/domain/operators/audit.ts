import type { Prisma } from '../../generated/prisma/client.ts';
import type { Db } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';
import { SvcError } from '../../errors/svc-error.ts';
import type { AuditAction } from '../audit/actions.ts';
import type { RequestFacts } from './ports.ts';

/**
 * Audit rows of this capability, and the one refusal tenancy (domain/context.ts) also gives (a project's console IP allowlist). Imports
 * neither tenancy nor a service, so that tenancy may import it.
 * The actor (actor_key_id) is the operator's `opr_…` id, or null when the refusal happened before anyone was known;
 * SCIM's own changes name `scim`.
 */
export async function auditOperator(
  db: Db | Prisma.TransactionClient,
  facts: RequestFacts,
  nowMs: number,
  actorId: string | null,
  action: AuditAction,
  input: { projectId?: string | null; targetId?: string | null; data?: Prisma.InputJsonValue } = {},
): Promise<void> {
  await db.auditEvent.create({
    data: {
      id: newId('aud', nowMs),
      projectId: input.projectId ?? null,
      action,
      actorKeyId: actorId,
      targetId: input.targetId ?? null,
      requestId: facts.requestId,
      ip: facts.ip,
      data: input.data ?? {},
      createdAt: new Date(nowMs),
    },
  });
}

export const PROJECT_IP_NOT_ALLOWED = "This address is not in the project's console IP allowlist.";

/**
 * A console session addressing a project from outside that project's console IP allowlist (CONTRACT §17), however the
 * project was named: audited as operator.request_refused (reason project_ip_not_allowed), then 403 insufficient_scope.
 */
export async function refuseProjectAddress(
  db: Db,
  facts: RequestFacts,
  nowMs: number,
  session: { operatorId: string; sessionId: string },
  projectId: string,
): Promise<SvcError> {
  await auditOperator(db, facts, nowMs, session.operatorId, 'operator.request_refused', {
    projectId,
    targetId: session.sessionId,
    data: { reason: 'project_ip_not_allowed', session_id: session.sessionId },
  });
  return new SvcError('insufficient_scope', { message: PROJECT_IP_NOT_ALLOWED });
}
