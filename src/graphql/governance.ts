import type { Approval } from '../generated/prisma/client.ts';
import {
  approvalStatus,
  approveApproval,
  claimApprovalSecret,
  getApproval,
  listApprovals,
  rejectApproval,
  secretDelivery,
} from '../domain/governance/approvals.ts';
import { getGovernancePolicy, type GovernancePolicy, type Residency } from '../domain/governance/policy.ts';
import { setGovernancePolicy, setResidency } from '../domain/governance/guarded.ts';
import { builder } from './builder.ts';
import { serviceConnection } from './connections.ts';

type ApprovalView = Approval & { secret?: string };

/** REST's svc.approval object (CONTRACT §15) with camelCase names. */
export const ApprovalRef = builder.objectRef<ApprovalView>('Approval').implement({
  description: 'A guarded change waiting for a second key (dual control), or its decision.',
  fields: (t) => ({
    id: t.exposeID('id'),
    projectId: t.exposeID('projectId'),
    action: t.exposeString('action', { description: 'The guarded action, e.g. rate_limits.update.' }),
    resource: t.exposeString('resource', { description: 'The guarded resource of the dual control list, e.g. rate_limits.' }),
    params: t.field({ type: 'JSON', description: 'The path ids of the change, e.g. {key_id}.', resolve: (a) => (a.args as { params?: unknown }).params ?? {} }),
    request: t.field({ type: 'JSON', description: 'The body of the change, as REST takes it (snake_case).', resolve: (a) => a.request }),
    before: t.field({ type: 'JSON', nullable: true, description: 'The resource when the change was queued; null for a create.', resolve: (a) => a.before ?? null }),
    requestedBy: t.exposeString('requestedBy'),
    status: t.string({
      description: 'pending, approved, rejected, expired or failed.',
      resolve: (a, _args, { ctx }) => approvalStatus(a, ctx.now()),
    }),
    decidedBy: t.exposeString('decidedBy', { nullable: true }),
    decidedAt: t.expose('decidedAt', { type: 'UnixSeconds', nullable: true }),
    reason: t.exposeString('reason', { nullable: true }),
    error: t.field({ type: 'JSON', nullable: true, description: 'Why a failed approval failed: {code, message, param}.', resolve: (a) => a.error ?? null }),
    resultId: t.exposeString('resultId', { nullable: true, description: 'The object the applied change created or changed.' }),
    secretDelivery: t.string({
      nullable: true,
      description: 'A secret the applied change issued (a key or a webhook): null when none, awaiting_claim (the requester claims it once with claimApprovalSecret), claimed.',
      resolve: (a) => secretDelivery(a),
    }),
    secretClaimedAt: t.expose('secretClaimedAt', { type: 'UnixSeconds', nullable: true }),
    expiresAt: t.expose('expiresAt', { type: 'UnixSeconds' }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    secret: t.string({
      nullable: true,
      description: 'A secret the applied change issued (a key or a webhook): only in its requester\'s claimApprovalSecret answer, once; never to the approver.',
      resolve: (a) => a.secret ?? null,
    }),
  }),
});

const GovernancePolicyRef = builder.objectRef<GovernancePolicy>('GovernancePolicy').implement({
  description: "The project's dual control list (CONTRACT §15).",
  fields: (t) => ({
    projectId: t.exposeID('projectId'),
    dualControl: t.exposeStringList('dualControl', { description: 'rate_limits, budget, residency, routing, retention, pii, webhooks, keys.' }),
    updatedAt: t.expose('updatedAt', { type: 'UnixSeconds', nullable: true }),
  }),
});

const ResidencyRef = builder.objectRef<Residency>('Residency').implement({
  fields: (t) => ({
    projectId: t.exposeID('projectId'),
    region: t.exposeString('region', { nullable: true, description: 'null: not pinned.' }),
  }),
});

builder.queryFields((t) => ({
  approvals: t.connection(
    {
      type: ApprovalRef,
      nullable: true,
      authScopes: { action: 'approval.list' },
      description: 'Newest first; status filters (pending, approved, rejected, expired, failed).',
      args: { projectId: t.arg.id(), status: t.arg.string() },
      resolve: (_root, args, { ctx }) =>
        serviceConnection(args, (query) =>
          listApprovals(ctx, { ...query, project_id: args.projectId ?? undefined, status: args.status ?? undefined }),
        ),
    },
    { name: 'ApprovalConnection' },
    { name: 'ApprovalEdge' },
  ),
  approval: t.field({
    type: ApprovalRef,
    nullable: true,
    authScopes: { action: 'approval.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getApproval(ctx, String(args.id)),
  }),
  governancePolicy: t.field({
    type: GovernancePolicyRef,
    nullable: true,
    authScopes: { action: 'governance.read' },
    args: { projectId: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getGovernancePolicy(ctx, String(args.projectId)),
  }),
}));

builder.mutationFields((t) => ({
  setGovernancePolicy: t.field({
    type: GovernancePolicyRef,
    nullable: true,
    authScopes: { action: 'governance.update' },
    description: 'Once the list is non-empty, changing it needs a second key (dual_control_required). Emits policy.updated.',
    args: { projectId: t.arg.id({ required: true }), dualControl: t.arg.stringList({ required: true }) },
    resolve: (_root, args, { ctx }) => setGovernancePolicy(ctx, String(args.projectId), { dual_control: args.dualControl }),
  }),
  setResidency: t.field({
    type: ResidencyRef,
    nullable: true,
    authScopes: { action: 'residency.update' },
    description: 'Pins the project to a region, or unpins it with null (the argument must be given). Emits policy.updated.',
    args: { projectId: t.arg.id({ required: true }), region: t.arg.string() },
    // Absent and null differ, as in REST's body: absent is 400 invalid_request, null unpins.
    resolve: (_root, args, { ctx, ports }) =>
      setResidency(ports.projects, ctx, String(args.projectId), 'region' in args ? { region: args.region } : {}),
  }),
  approveApproval: t.field({
    type: ApprovalRef,
    nullable: true,
    authScopes: { action: 'approval.approve' },
    description:
      'Applies the queued change (re-validated) as the key that asked; another key than the requester (segregation_of_duties). A change no longer valid leaves the approval failed. Emits approval.approved.',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, args, { ctx, ports }) => (await approveApproval(ports, ctx, String(args.id))).approval,
  }),
  claimApprovalSecret: t.field({
    type: ApprovalRef,
    nullable: true,
    authScopes: { action: 'approval.claim' },
    description:
      'The requester of an applied change takes the secret it issued (a created or rotated key, a created webhook), once; anyone else: not_found. Nothing to claim: invalid_request.',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, args, { ctx, ports }) => {
      const { approval, secret } = await claimApprovalSecret(ports, ctx, String(args.id));
      return { ...approval, secret };
    },
  }),
  rejectApproval: t.field({
    type: ApprovalRef,
    nullable: true,
    authScopes: { action: 'approval.reject' },
    description: 'Nothing is applied. Emits approval.rejected.',
    args: { id: t.arg.id({ required: true }), reason: t.arg.string() },
    resolve: (_root, args, { ctx }) => rejectApproval(ctx, String(args.id), { reason: args.reason }),
  }),
}));
