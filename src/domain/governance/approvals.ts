import type { Approval, Prisma } from '../../generated/prisma/client.ts';
import type { Db, Tx } from '../../db/client.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import { allows, type Action } from '../auth/actions.ts';
import { OPERATOR_KEY_ID, keyCaller } from '../auth/service.ts';
import { recordAudit, recordSystemAudit } from '../audit/service.ts';
import { headerNames, addressed, visibleProjectId, type Caller, type Ctx, type OperatorSession, type Transact } from '../context.ts';
import { enqueueEvent } from '../events/outbox.ts';
import { SCOPES } from '../keys/scopes.ts';
import { keyStatus } from '../keys/service.ts';
import { isRole, roleAllows, scopesOfRole, strongest, type Role } from '../operators/roles.ts';
import { isId } from '../../db/ids.ts';
import { pageById, type Page, type PageQuery } from '../pagination.ts';
import type { DomainPorts } from '../ports.ts';
import { argumentsOf, leadingArguments, type StoredCall } from './guard.ts';
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
  if (ctx.caller.kind === 'key' && (await issuedByRequester(ctx.db, approval, ctx.caller.keyId))) {
    throw new SvcError('segregation_of_duties', {
      message:
        'This key was created (or its secret issued) after the change was requested, by the requester or a key descending from it: another key must approve or reject it.',
    });
  }
}

/** How far up a key's line of creators the check below looks; a longer line is refused (it cannot be cleared). */
export const MAX_ISSUER_DEPTH = 64;

/** Who issued a key's secrets: its creator, and whoever rotated it last (each a key id, key_master or an opr_ id). */
const issuersOf = (k: { createdBy: string | null; rotatedBy: string | null }): string[] =>
  [k.createdBy, k.rotatedBy].filter((id): id is string => id !== null);

/**
 * Whether the deciding key was minted for the occasion by the requester: created, or given its current secret by a
 * rotation, after the change was requested, by the requester itself or by a key descending from it (a key it
 * created or rotated, at any time, transitively). The operator key (key_master) and console operators (opr_…) end a
 * line: nothing creates them. A key created by the operator is the requester's only when the operator asked.
 */
async function issuedByRequester(db: Db, approval: Approval, deciderKeyId: string): Promise<boolean> {
  const decider = await db.apiKey.findFirst({
    where: { id: deciderKeyId, projectId: approval.projectId },
    select: { createdBy: true, createdAt: true, rotatedBy: true, rotatedAt: true },
  });
  if (!decider) return false;
  const since = approval.createdAt.getTime();
  let frontier = [
    ...(decider.createdAt.getTime() > since && decider.createdBy !== null ? [decider.createdBy] : []),
    ...(decider.rotatedAt !== null && decider.rotatedAt.getTime() > since && decider.rotatedBy !== null ? [decider.rotatedBy] : []),
  ];
  const seen = new Set<string>([deciderKeyId]);
  for (let depth = 0; frontier.length > 0; depth++) {
    if (frontier.includes(approval.requestedBy)) return true;
    const keys = [...new Set(frontier)].filter((id) => id !== OPERATOR_KEY_ID && isId('key', id) && !seen.has(id));
    if (keys.length === 0) return false;
    if (depth >= MAX_ISSUER_DEPTH) return true;
    for (const id of keys) seen.add(id);
    const rows = await db.apiKey.findMany({ where: { id: { in: keys } }, select: { createdBy: true, rotatedBy: true } });
    frontier = rows.flatMap(issuersOf);
  }
  return false;
}

/** Another request decided the approval between our read and our conditional update. */
class AlreadyDecided extends SvcError {
  constructor() {
    super('invalid_request', { param: 'approval_id', message: 'This approval was decided by another request at the same time.' });
  }
}
const alreadyDecided = () => new AlreadyDecided();

/**
 * A console operator (opr_…) that asked through its session, as it is now: still active, and its groups still give it
 * a role in the approval's project that allows the action (else the change fails, as for a revoked key). It acts as
 * a console session bound to that project, with its role's scopes.
 */
async function operatorRequester(db: Db, approval: Approval, now: Date): Promise<Caller> {
  const operator = await db.operator.findUnique({
    where: { id: approval.requestedBy },
    select: {
      active: true,
      userName: true,
      memberships: { select: { group: { select: { roles: { where: { projectId: approval.projectId }, select: { role: true } } } } } },
    },
  });
  if (!operator?.active) {
    throw new SvcError('invalid_api_key', { message: `The operator that requested this change (${approval.requestedBy}) is no longer active.` });
  }
  let role: Role | undefined;
  for (const m of operator.memberships) for (const r of m.group.roles) if (isRole(r.role)) role = strongest(role, r.role);
  if (role === undefined || !roleAllows(role, approval.action as Action)) {
    throw new SvcError('insufficient_scope', { message: `The operator that requested this change no longer has a role in this project that allows ${approval.action}.` });
  }
  const session: OperatorSession = {
    operatorId: approval.requestedBy,
    userName: operator.userName,
    sessionId: approval.id,
    method: 'approval',
    expiresAt: now.getTime(),
    role,
    projects: new Map([[approval.projectId, role]]),
  };
  return { kind: 'session', keyId: approval.requestedBy, projectId: approval.projectId, scopes: scopesOfRole(role), session };
}

/** The key that asked, as it is now: a key revoked or expired since, or no longer allowed the action, fails the change. */
async function requesterOf(db: Db, approval: Approval, now: Date): Promise<Caller> {
  let caller: Caller;
  if (approval.requestedBy === OPERATOR_KEY_ID) {
    caller = { kind: 'operator', keyId: OPERATOR_KEY_ID, projectId: null, scopes: SCOPES };
  } else if (isId('opr', approval.requestedBy)) {
    caller = await operatorRequester(db, approval, now);
  } else {
    const key = await db.apiKey.findFirst({ where: { id: approval.requestedBy, projectId: approval.projectId } });
    if (!key || keyStatus(key, now) !== 'active') {
      throw new SvcError('invalid_api_key', { message: `The key that requested this change (${approval.requestedBy}) is no longer active.` });
    }
    caller = keyCaller(key);
  }
  if (!allows(approval.action as Action, caller.scopes)) {
    throw new SvcError('insufficient_scope', { message: `The key that requested this change no longer holds the scope for ${approval.action}.` });
  }
  return caller;
}

export interface ApprovalDecision {
  approval: Approval;
}

/** Binds a sealed secret to its approval and its requester: copied onto another row, it does not open. */
const secretAad = (a: Pick<Approval, 'id' | 'requestedBy'>): string => `approval-secret\n${a.id}\n${a.requestedBy}`;

const errorJson = (err: SvcError): Prisma.InputJsonObject => ({ code: err.code, message: err.message, param: err.param });
const eventData = (a: Approval, decidedBy: string) => ({ approval_id: a.id, action: a.action, requested_by: a.requestedBy, decided_by: decidedBy });

/**
 * Applies the stored change as the key that asked it, re-validated by its service's check, in one transaction with
 * the decision: the conditional claim of the pending row comes first in the transaction the service's apply is given,
 * so of two approvers at once exactly one applies it (the other gets 400, already decided), and the change, its audit
 * and events, approval.approve and approval.approved commit together. A change no longer valid (its key revoked
 * meanwhile, the policy deleted, a name taken…) leaves the approval `failed` with that error; the answer is then 200
 * with the failed approval.
 */
export async function approveApproval(ports: DomainPorts, ctx: Ctx, approvalId: string): Promise<ApprovalDecision> {
  const sealer = ports.privacy.sealer;
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
  // The apply's transaction, with the claim first and the result's id last; its code after commit (evictions) runs as usual.
  const transact: Transact = async (fn) => {
    if (claimed) return ctx.db.$transaction(fn);
    const result = await ctx.db.$transaction(async (tx) => {
      await claim(tx);
      const out = await fn(tx);
      const id = (out as { id?: unknown } | null)?.id;
      if (typeof id === 'string') await store.setResult(tx, approval.id, id);
      return out;
    });
    claimed = true;
    return result;
  };
  let result: unknown;
  try {
    const requester = await requesterOf(ctx.db, approval, now);
    // The requester's identity and project, this request's id, ip and clock.
    const applyCtx: Ctx = { ...ctx, caller: requester, project: headerNames(approval.projectId), projectId: requester.projectId };
    const checked = await call.check(...argumentsOf(call, ports, applyCtx, approval.args as unknown as StoredCall));
    result = await call.apply(...leadingArguments(call, ports, applyCtx), checked, transact);
    // An apply that changed nothing (disabling a disabled webhook) opened no transaction: the decision commits alone.
    if (!claimed) {
      await ctx.db.$transaction(async (tx) => claim(tx));
      claimed = true;
    }
  } catch (err) {
    if (claimed || !(err instanceof SvcError) || err instanceof AlreadyDecided) throw err;
    return { approval: await markFailed(ctx, approval, err) };
  }
  // A secret the change issued (a key's, a webhook's) is never the approver's: it is kept sealed on the approval
  // for the requester, who claims it once (claimApprovalSecret). The approve answer, and so its Idempotency-Key
  // record, carries none.
  const secret = (result as { secret?: unknown } | null)?.secret;
  if (typeof secret === 'string') await store.setSecret(ctx.db, approval.id, sealer.seal(secret, secretAad(approval)));
  return { approval: (await store.findApproval(ctx.db, approval.id, approval.projectId))! };
}

/** What the approval says about a secret its change issued: none, one waiting for its requester, or claimed. */
export type SecretDelivery = 'awaiting_claim' | 'claimed' | null;
export function secretDelivery(a: Pick<Approval, 'resultSecret' | 'secretClaimedAt'>): SecretDelivery {
  if (a.resultSecret !== null) return 'awaiting_claim';
  return a.secretClaimedAt !== null ? 'claimed' : null;
}

/**
 * The requester of an applied change that issued a secret (a key created or rotated, a webhook created) takes it here,
 * once: the caller must be the key (or operator, or console operator) that asked; anyone else gets 404 not_found, as
 * for an approval it cannot see. The sealed copy is wiped in the same conditional update that marks it claimed (of
 * two claims at once, one gets it), audited approval.claim. No secret to claim (not approved, the change issued none,
 * already claimed): 400 invalid_request, param approval_id.
 */
export async function claimApprovalSecret(ports: DomainPorts, ctx: Ctx, approvalId: string): Promise<{ approval: Approval; secret: string }> {
  const approval = await getApproval(ctx, approvalId);
  if (approval.requestedBy !== ctx.caller.keyId) {
    throw new SvcError('not_found', { param: 'approval_id', message: 'No such approval requested by this caller.' });
  }
  const now = ctx.now();
  const status = approvalStatus(approval, now);
  if (status !== 'approved') throw invalid('approval_id', `This approval is ${status}: only an approved change can have a secret to claim.`);
  if (approval.resultSecret === null) {
    throw invalid(
      'approval_id',
      approval.secretClaimedAt !== null
        ? `The secret of this change was claimed at ${Math.floor(approval.secretClaimedAt.getTime() / 1000)}: it is shown once.`
        : 'The applied change issued no secret.',
    );
  }
  // Opened before it is wiped: a secret that cannot be opened (the encryption key changed) stays for a later claim.
  const secret = ports.privacy.sealer.open(approval.resultSecret, secretAad(approval));
  await ctx.db.$transaction(async (tx) => {
    if (!(await store.claimSecret(tx, approval.id, approval.resultSecret!, now))) {
      throw invalid('approval_id', 'The secret of this change was claimed by another request at the same time: it is shown once.');
    }
    await recordAudit(tx, ctx, 'approval.claim', { projectId: approval.projectId, targetId: approval.id, data: { action: approval.action, result_id: approval.resultId } });
  });
  return { approval: (await store.findApproval(ctx.db, approval.id, approval.projectId))!, secret };
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
