import type { Approval, Prisma } from '../../generated/prisma/client.ts';
import type { Db, Tx } from '../../db/client.ts';

/** The approvals' queries; projectId is in every where that a caller's input reaches. */

export type ApprovalStatus = 'pending' | 'approved' | 'rejected' | 'expired' | 'failed';
export const APPROVAL_STATUSES: readonly ApprovalStatus[] = ['pending', 'approved', 'rejected', 'expired', 'failed'];

export function insertApproval(tx: Tx, data: Prisma.ApprovalUncheckedCreateInput): Promise<Approval> {
  return tx.approval.create({ data });
}

export function findApproval(db: Db | Tx, approvalId: string, projectId: string | undefined): Promise<Approval | null> {
  return db.approval.findFirst({ where: { id: approvalId, ...(projectId !== undefined ? { projectId } : {}) } });
}

/**
 * The status filter as callers see it: a pending approval past its expiry is `expired` even before the background
 * worker has marked it (jobs/approvals).
 */
export function statusWhere(status: ApprovalStatus | undefined, now: Date): Prisma.ApprovalWhereInput {
  if (status === undefined) return {};
  if (status === 'pending') return { status: 'pending', expiresAt: { gt: now } };
  if (status === 'expired') return { OR: [{ status: 'expired' }, { status: 'pending', expiresAt: { lte: now } }] };
  return { status };
}

/**
 * The decision, taken only while the approval is pending (a conditional UPDATE): of two approvers at once, on any
 * replica, exactly one changes the row; PostgreSQL makes the second wait for the first's commit and then finds no
 * pending row. Returns whether this call decided.
 */
export async function decide(
  tx: Tx,
  approvalId: string,
  data: { status: ApprovalStatus; decidedBy: string | null; decidedAt: Date; reason?: string | null; error?: Prisma.InputJsonValue },
): Promise<boolean> {
  const { count } = await tx.approval.updateMany({ where: { id: approvalId, status: 'pending' }, data });
  return count === 1;
}

/** The sealed secret the applied change issued, kept for its requester's one claim. */
export async function setSecret(db: Db, approvalId: string, sealed: string): Promise<void> {
  await db.approval.update({ where: { id: approvalId }, data: { resultSecret: sealed } });
}

/** Wipes the sealed secret if it is still the one read (a conditional update): of two claims at once, one wins. */
export async function claimSecret(tx: Tx, approvalId: string, sealed: string, now: Date): Promise<boolean> {
  const { count } = await tx.approval.updateMany({ where: { id: approvalId, resultSecret: sealed }, data: { resultSecret: null, secretClaimedAt: now } });
  return count === 1;
}

export async function setResult(tx: Tx, approvalId: string, resultId: string): Promise<void> {
  await tx.approval.update({ where: { id: approvalId }, data: { resultId } });
}

/** Pending approvals past their expiry, oldest first (the background worker's batch). */
export function findOverdue(db: Db, now: Date, take: number): Promise<Pick<Approval, 'id' | 'projectId' | 'action' | 'requestedBy'>[]> {
  return db.approval.findMany({
    where: { status: 'pending', expiresAt: { lte: now } },
    orderBy: { expiresAt: 'asc' },
    take,
    select: { id: true, projectId: true, action: true, requestedBy: true },
  });
}
