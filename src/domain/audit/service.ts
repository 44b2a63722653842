import type { Prisma, AuditEvent } from '../../generated/prisma/client.ts';
import type { Tx } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';
import { visibleProjectId, type Ctx } from '../context.ts';
import { paginate, type Page } from '../pagination.ts';
import { parseInput } from '../validation.ts';
import { AUDIT_MAX_PAGE_SIZE, AuditQuery } from './schema.ts';
import type { AuditAction } from './actions.ts';
import type { AuditPorts } from './ports.ts';


export interface AuditInput {
  projectId: string | null;
  targetId?: string | null;
  data?: Prisma.InputJsonValue;
}

/** Written in the caller's transaction, so an audit row exists exactly when the change it describes does. */
export async function recordAudit(tx: Tx, ctx: Ctx, action: AuditAction, input: AuditInput): Promise<AuditEvent> {
  const now = ctx.now();
  return tx.auditEvent.create({
    data: {
      id: newId('aud', now.getTime()),
      projectId: input.projectId,
      action,
      actorKeyId: ctx.caller.keyId,
      targetId: input.targetId ?? null,
      requestId: ctx.requestId,
      ip: ctx.ip,
      data: input.data ?? {},
      createdAt: now,
    },
  });
}

/** Audit entries written by the system itself (no request), e.g. webhook.delivery.failed. */
export async function recordSystemAudit(
  tx: Tx,
  now: Date,
  action: AuditAction,
  input: AuditInput,
): Promise<AuditEvent> {
  return tx.auditEvent.create({
    data: {
      id: newId('aud', now.getTime()),
      projectId: input.projectId,
      action,
      actorKeyId: null,
      targetId: input.targetId ?? null,
      requestId: null,
      ip: null,
      data: input.data ?? {},
      createdAt: now,
    },
  });
}

/** Newest first. With `ports`, on the read replica once it has replayed every write committed before the read. */
export async function listAuditEvents(ctx: Ctx, raw: unknown, ports?: AuditPorts): Promise<Page<AuditEvent>> {
  const query = parseInput(AuditQuery, raw);
  const projectId = await visibleProjectId(ctx, query.project_id);
  const db = ports ? await ports.reads.client() : ctx.db;
  const where: Prisma.AuditEventWhereInput = {
    ...(projectId !== undefined ? { projectId } : {}),
    ...(query.action !== undefined ? { action: query.action } : {}),
  };
  return paginate(
    query,
    {
      cursorField: 'id',
      fetch: ({ cursor, order, take }) =>
        db.auditEvent.findMany({ where: { ...where, ...(cursor ? { id: cursor } : {}) }, orderBy: { id: order }, take }),
      exists: async (id) => (await db.auditEvent.count({ where: { ...where, id } })) > 0,
    },
    AUDIT_MAX_PAGE_SIZE,
  );
}
