import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Approval } from '../../generated/prisma/client.ts';
import { unixOrNull, unixSeconds } from '../../domain/context.ts';
import {
  approvalStatus,
  approveApproval,
  claimApprovalSecret,
  getApproval,
  listApprovals,
  rejectApproval,
  secretDelivery,
} from '../../domain/governance/approvals.ts';
import { ApprovalIdParams, ListApprovalsQuery, RejectApproval } from '../../domain/governance/schema.ts';
import { ListOf, sendList } from '../list.ts';
import { NullableStr, UnixOrNull, Unix } from '../response-fields.ts';

/**
 * The approval object (CONTRACT §15) and our additions: `params` (the path ids of the change, e.g. key_id), `before`
 * (the resource when the change was queued; null for a create), `error` (why a `failed` approval failed), `result_id`
 * (the object the applied change created or changed), `secret_delivery` (a secret the applied change issued:
 * null when none, `awaiting_claim`, `claimed`) with `secret_claimed_at`, and, in the requester's claim answer only
 * (POST /v1/approvals/{id}/claim, once), the `secret` itself. The approver never sees it.
 */
export function presentApproval(a: Approval, now: Date, secret?: string) {
  const args = a.args as { params?: Record<string, string> };
  return {
    id: a.id,
    object: 'svc.approval' as const,
    project_id: a.projectId,
    action: a.action,
    resource: a.resource,
    params: args.params ?? {},
    request: a.request,
    before: a.before ?? null,
    requested_by: a.requestedBy,
    status: approvalStatus(a, now),
    decided_by: a.decidedBy,
    decided_at: unixOrNull(a.decidedAt),
    reason: a.reason,
    error: a.error ?? null,
    result_id: a.resultId,
    secret_delivery: secretDelivery(a),
    secret_claimed_at: unixOrNull(a.secretClaimedAt),
    expires_at: unixSeconds(a.expiresAt),
    created_at: unixSeconds(a.createdAt),
    ...(secret !== undefined ? { secret } : {}),
  };
}

/** presentApproval's answer. */
export const ApprovalObject = Type.Object(
  {
    id: Type.String({ description: 'The approval id (apr_…).' }),
    object: Type.Literal('svc.approval'),
    project_id: Type.String({ description: 'The project (prj_…).' }),
    action: Type.String({ description: 'The guarded action queued, e.g. key.rotate.' }),
    resource: Type.String({ description: 'The guarded resource, e.g. keys.' }),
    params: Type.Record(Type.String(), Type.String(), { description: 'The path ids of the change, e.g. key_id.' }),
    request: Type.Unknown({ description: 'The change\'s request body as sent.' }),
    before: Type.Unknown({ description: 'The resource when the change was queued; null for a create.' }),
    requested_by: Type.String({ description: 'The key that asked for the change.' }),
    status: Type.String({ description: 'pending, approved, rejected, expired or failed.' }),
    decided_by: NullableStr('The key that approved or rejected it, or null.'),
    decided_at: UnixOrNull('When it was decided'),
    reason: NullableStr('The reason given with a rejection, or null.'),
    error: Type.Unknown({ description: 'Why a failed approval failed (an error object), or null.' }),
    result_id: NullableStr('The object the applied change created or changed, or null.'),
    secret_delivery: NullableStr('A secret the applied change issued: awaiting_claim, claimed, or null: none.'),
    secret_claimed_at: UnixOrNull('When the requester claimed the secret'),
    expires_at: Unix('When a pending approval expires'),
    created_at: Unix('When the change was queued'),
    secret: Type.Optional(Type.String({ description: 'The issued secret: only in the requester\'s claim answer, once.' })),
  },
  { description: 'A change queued under dual control (CONTRACT §15).' },
);

export const approvalsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/v1/approvals', { config: { action: 'approval.list' }, schema: { querystring: ListApprovalsQuery, response: { 200: ListOf(ApprovalObject) } } }, async (req, reply) => {
    const now = req.ctx.now();
    return sendList(reply, await listApprovals(req.ctx, req.query), '/v1/approvals', (a) => presentApproval(a, now));
  });

  app.get('/v1/approvals/:approval_id', { config: { action: 'approval.read' }, schema: { params: ApprovalIdParams, response: { 200: ApprovalObject } } }, async (req) =>
    presentApproval(await getApproval(req.ctx, req.params.approval_id), req.ctx.now()),
  );

  app.post('/v1/approvals/:approval_id/approve', { config: { action: 'approval.approve' }, schema: { params: ApprovalIdParams, response: { 200: ApprovalObject } } }, async (req) => {
    const { approval } = await approveApproval(app.ports, req.ctx, req.params.approval_id);
    return presentApproval(approval, req.ctx.now());
  });

  // The requester of an applied change takes the secret it issued, once (anyone else: 404).
  app.post('/v1/approvals/:approval_id/claim', { config: { action: 'approval.claim' }, schema: { params: ApprovalIdParams, response: { 200: ApprovalObject } } }, async (req) => {
    const { approval, secret } = await claimApprovalSecret(app.ports, req.ctx, req.params.approval_id);
    return presentApproval(approval, req.ctx.now(), secret);
  });

  app.post('/v1/approvals/:approval_id/reject', { config: { action: 'approval.reject' }, schema: { params: ApprovalIdParams, body: RejectApproval, response: { 200: ApprovalObject } } }, async (req) =>
    presentApproval(await rejectApproval(req.ctx, req.params.approval_id, req.body ?? {}), req.ctx.now()),
  );
};
