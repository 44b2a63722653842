import type { Approval, Prisma } from '../../generated/prisma/client.ts';
import type { Db, Tx } from '../../db/client.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import { allows, type Action } from '../auth/actions.ts';
import { OPERATOR_KEY_ID } from '../auth/service.ts';
import { recordAudit, recordSystemAudit } from '../audit/service.ts';
import type { Caller, Ctx } from '../context.ts';
import { enqueueEvent } from '../events/outbox.ts';
import { SCOPES, type Scope } from '../keys/scopes.ts';
import { keyStatus } from '../keys/service.ts';
import { pageById, type Page, type PageQuery } from '../pagination.ts';
import type { DomainPorts } from '../ports.ts';
import { addressed, visibleProjectId } from '../tenancy.ts';
import { argumentsOf, type StoredCall } from './guard.ts';
import { registeredCall } from './guarded.ts';
import * as store from './store.ts';
import { parseInput } from '../validation.ts';
import { ListApprovalsQuery, RejectApproval } from './schema.ts';
import { APPROVAL_STATUSES, type ApprovalStatus } from './store.ts';

export { APPROVAL_STATUSES, type ApprovalStatus } from './store.ts';

/** What a caller sees: a pending approval past its expiry is expired, whether or not the worker has marked it yet. */
export function approvalStatus(a: Pick<Approval, 'status' | 'expiresAt'>, now: Date): ApprovalStatus {
  if (a.status === 'pending' && a.expiresAt.getTime() <= now.getTime()) return 'expired';
  return a.status as ApprovalStatus;
}

/** Newest first; a key sees its own project's, the operator every project's (or the one it names). */
export async function listApprovals(ctx: Ctx, input: unknown): Promise<Page<Approval>> {
  const query = parseInput(ListApprovalsQuery, input);
  const status = query.status as ApprovalStatus | undefined;
  const projectId = await visibleProjectId(ctx, query.project_id);
  const where: Prisma.ApprovalWhereInput = { ...(projectId !== undefined ? { projectId } : {}), ...store.statusWhere(status, ctx.now()) };
  return pageById(query, ctx.db.approval, where);
}

/** Another project's approval looks absent (404), as every other object. */
export async function getApproval(ctx: Ctx, approvalId: string): Promise<Approval> {
  const projectId = await visibleProjectId(ctx, null);
  const found = await store.findApproval(ctx.db, approvalId, projectId);
  if (!found) throw new SvcError('not_found', { param: 'approval_id', message: 'No such approval.' });
  addressed(ctx, found.projectId);
  return found;
}

/**
 * The approval may be decided by this caller: still pending (one past its expiry is marked expired, audited, and
 * refused), and the caller is not the key that asked (409 segregation_of_duties; the operator is one identity).
 */
async function assertDecidable(ctx: Ctx, approval: Approval): Promise<void> {
  const now = ctx.now();
  if (approvalStatus(approval, now) === 'expired' && approval.status === 'pending') {
    await expireOne(ctx.db, approval, now);
    throw invalid('approval_id', `This approval expired at ${Math.floor(approval.expiresAt.getTime() / 1000)} and can no longer be decided.`);
  }
  if (approval.status !== 'pending') throw invalid('approval_id', `This approval is already ${approval.status}.`);
  if (approval.requestedBy === ctx.caller.keyId) {
    throw new SvcError('segregation_of_duties', {
      message: 'The key that requested a change cannot decide it: another key must approve or reject it.',
    });
  }
}

/** Another request decided the approval between our read and our conditional update. */
class AlreadyDecided extends SvcError {
  constructor() {
    super('invalid_request', { param: 'approval_id', message: 'This approval was decided by another request at the same time.' });
  }
}
const alreadyDecided = () => new AlreadyDecided();

/** The key that asked, as it is now: a key revoked or expired since, or no longer allowed the action, fails the change. */
async function requesterOf(db: Db, approval: Approval, now: Date): Promise<Caller> {
  let caller: Caller;
  if (approval.requestedBy === OPERATOR_KEY_ID) {
    caller = { kind: 'operator', keyId: OPERATOR_KEY_ID, projectId: null, scopes: SCOPES };
  } else {
    const key = await db.apiKey.findFirst({ where: { id: approval.requestedBy, projectId: approval.projectId } });
    if (!key || keyStatus(key, now) !== 'active') {
      throw new SvcError('invalid_api_key', { message: `The key that requested this change (${approval.requestedBy}) is no longer active.` });
    }
    caller = { kind: 'key', keyId: key.id, projectId: key.projectId, scopes: key.scopes as Scope[], budgetMicros: key.budgetMicros };
  }
  if (!allows(approval.action as Action, caller.scopes)) {
    throw new SvcError('insufficient_scope', { message: `The key that requested this change no longer holds the scope for ${approval.action}.` });
  }
  return caller;
}

export interface ApprovalDecision {
  approval: Approval;
  /** A secret the applied change issued (a key's or a webhook's), shown once, in this answer only. */
  secret?: string;
}

const errorJson = (err: SvcError): Prisma.InputJsonObject => ({ code: err.code, message: err.message, param: err.param });
const eventData = (a: Approval, decidedBy: string) => ({ approval_id: a.id, action: a.action, requested_by: a.requestedBy, decided_by: decidedBy });

/**
 * Applies the stored change as the key that asked it, re-validated by its own service, in one transaction with the
 * decision: the conditional claim of the pending row comes first in the service's own transaction, so of two
 * approvers at once exactly one applies it (the other gets 400, already decided), and the change, its audit and events,
 * approval.approve and approval.approved commit together. A change no longer valid (its key revoked meanwhile, the
 * policy deleted, a name taken…) rolls back and leaves the approval `failed` with that error; the answer is then 200
 * with the failed approval.
 */
export async function approveApproval(ports: DomainPorts, ctx: Ctx, approvalId: string): Promise<ApprovalDecision> {
  const approval = await getApproval(ctx, approvalId);
  await assertDecidable(ctx, approval);
  const call = registeredCall(approval.action);
  if (!call) throw new Error(`approval ${approval.id}: no guarded call registered for ${approval.action}`);
  const now = ctx.now();
  let claimed = false;
  const claim = async (tx: Tx) => {
    if (!(await store.decide(tx, approval.id, { status: 'approved', decidedBy: ctx.caller.keyId, decidedAt: now }))) throw alreadyDecided();
    await recordAudit(tx, ctx, 'approval.approve', { projectId: approval.projectId, targetId: approval.id, data: { action: approval.action, status: 'approved' } });
    await enqueueEvent(tx, now, approval.projectId, 'approval.approved', eventData(approval, ctx.caller.keyId));
  };
  // The service's transaction, with the claim first and the result's id last; code after it (evictions) runs as usual.
  const db = new Proxy(ctx.db, {
    get(target, prop) {
      if (prop === '$transaction') {
        return async (fn: (tx: Tx) => Promise<unknown>, opts?: unknown) => {
          if (claimed) return target.$transaction(fn, opts as never);
          const result = await target.$transaction(async (tx) => {
            await claim(tx);
            const out = await fn(tx);
            const id = (out as { id?: unknown } | null)?.id;
            if (typeof id === 'string') await store.setResult(tx, approval.id, id);
            return out;
          }, opts as never);
          claimed = true;
          return result;
        };
      }
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  let result: unknown;
  try {
    const requester = await requesterOf(ctx.db, approval, now);
    // The requester's identity and project, this request's id, ip and clock.
    const applyCtx: Ctx = { ...ctx, db, caller: requester, headerProjectId: approval.projectId, namedProjectId: null, projectId: requester.projectId };
    result = await call.service(...argumentsOf(call, ports, applyCtx, approval.args as unknown as StoredCall));
    // A service that changed nothing (disabling a disabled webhook) opened no transaction: the decision commits alone.
    if (!claimed) {
      await ctx.db.$transaction(async (tx) => claim(tx));
      claimed = true;
    }
  } catch (err) {
    if (claimed || !(err instanceof SvcError) || err instanceof AlreadyDecided) throw err;
    return { approval: await markFailed(ctx, approval, err) };
  }
  const secret = (result as { secret?: unknown } | null)?.secret;
  return { approval: (await store.findApproval(ctx.db, approval.id, approval.projectId))!, ...(typeof secret === 'string' ? { secret } : {}) };
}

async function markFailed(ctx: Ctx, approval: Approval, err: SvcError): Promise<Approval> {
  const now = ctx.now();
  await ctx.db.$transaction(async (tx) => {
    if (!(await store.decide(tx, approval.id, { status: 'failed', decidedBy: ctx.caller.keyId, decidedAt: now, error: errorJson(err) }))) throw alreadyDecided();
    await recordAudit(tx, ctx, 'approval.approve', {
      projectId: approval.projectId,
      targetId: approval.id,
      data: { action: approval.action, status: 'failed', error: errorJson(err) },
    });
  });
  return (await store.findApproval(ctx.db, approval.id, approval.projectId))!;
}

/** Nothing is applied. Audits approval.reject and emits approval.rejected; of two deciders at once, one wins. */
export async function rejectApproval(ctx: Ctx, approvalId: string, input: unknown = {}): Promise<Approval> {
  const reason = parseInput(RejectApproval, input ?? {}).reason ?? null;
  const approval = await getApproval(ctx, approvalId);
  await assertDecidable(ctx, approval);
  const now = ctx.now();
  await ctx.db.$transaction(async (tx) => {
    if (!(await store.decide(tx, approval.id, { status: 'rejected', decidedBy: ctx.caller.keyId, decidedAt: now, reason }))) throw alreadyDecided();
    await recordAudit(tx, ctx, 'approval.reject', { projectId: approval.projectId, targetId: approval.id, data: { action: approval.action, reason } });
    await enqueueEvent(tx, now, approval.projectId, 'approval.rejected', eventData(approval, ctx.caller.keyId));
  });
  return (await store.findApproval(ctx.db, approval.id, approval.projectId))!;
}

/** Marks one overdue approval expired (if still pending) and audits approval.expire as the system. */
async function expireOne(db: Db, approval: Pick<Approval, 'id' | 'projectId' | 'action' | 'requestedBy' | 'expiresAt'>, now: Date): Promise<boolean> {
  return db.$transaction(async (tx) => {
    if (!(await store.decide(tx, approval.id, { status: 'expired', decidedBy: null, decidedAt: now }))) return false;
    await recordSystemAudit(tx, now, 'approval.expire', {
      projectId: approval.projectId,
      targetId: approval.id,
      data: { action: approval.action, requested_by: approval.requestedBy },
    });
    return true;
  });
}

/**
 * The background worker's sweep (jobs/approvals): every pending approval past its 24 hours becomes `expired`, audited
 * approval.expire. Safe on every replica at once (the conditional update marks each once). Returns how many it marked.
 */
export async function expireOverdueApprovals(db: Db, now: Date, batch = 500): Promise<number> {
  let marked = 0;
  for (;;) {
    const overdue = await store.findOverdue(db, now, batch);
    for (const a of overdue) if (await expireOne(db, { ...a, expiresAt: now }, now)) marked++;
    if (overdue.length < batch) return marked;
  }
}
