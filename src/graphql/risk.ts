import type { RiskCase, RiskDraft } from '../generated/prisma/client.ts';
import { approveRiskReport } from '../domain/governance/guarded.ts';
import {
  addRiskEvidence,
  closeRiskCase,
  createRiskCase,
  getRiskCase,
  getRiskDraft,
  getRiskEvidence,
  listRiskCases,
  listRiskDrafts,
  listRiskEvidence,
  reportApproval,
  requestRiskDraft,
  updateRiskCase,
  updateRiskEvidence,
  type DraftKind,
  type RiskEvidence,
} from '../domain/risk/service.ts';
import { CreateEvidence, CreateRiskCase, UpdateEvidence, UpdateRiskCase } from '../domain/risk/schema.ts';
import { builder } from './builder.ts';
import { serviceConnection } from './connections.ts';
import { ApprovalRef } from './governance.ts';
import { inputTypeFrom, listFilters, serviceInput } from './inputs.ts';

const RiskEvidenceRef = builder.objectRef<RiskEvidence>('RiskEvidence').implement({
  description: 'Evidence of a Risk case: its bytes are fixed at upload (their SHA-256 shown); only metadata may change.',
  fields: (t) => ({
    id: t.exposeID('id'),
    projectId: t.exposeID('projectId'),
    caseId: t.exposeID('caseId'),
    name: t.exposeString('name'),
    contentType: t.exposeString('contentType'),
    size: t.exposeInt('size'),
    sha256: t.exposeString('sha256'),
    description: t.exposeString('description', { nullable: true }),
    metadata: t.field({ type: 'JSON', resolve: (e) => e.metadata }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    updatedAt: t.expose('updatedAt', { type: 'UnixSeconds' }),
  }),
});

type Types = typeof builder extends PothosSchemaTypes.SchemaBuilder<infer T> ? T : never;

/** The fields an assessment and a report share (the same row, kind apart). */
function draftFields(kind: DraftKind) {
  return (t: PothosSchemaTypes.ObjectFieldBuilder<Types, RiskDraft>) => ({
    id: t.exposeID('id'),
    projectId: t.exposeID('projectId'),
    caseId: t.exposeID('caseId'),
    status: t.exposeString('status', { description: kind === 'report' ? 'queued, running, completed, failed, approved.' : 'queued, running, completed, failed.' }),
    instructions: t.exposeString('instructions', { nullable: true }),
    content: t.field({ type: 'JSON', nullable: true, description: 'The model\'s structured draft, once completed.', resolve: (d) => d.content ?? null }),
    error: t.field({ type: 'JSON', nullable: true, resolve: (d) => d.error ?? null }),
    createdBy: t.exposeString('createdBy'),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    completedAt: t.expose('completedAt', { type: 'UnixSeconds', nullable: true }),
  });
}

const RiskAssessmentRef = builder.objectRef<RiskDraft>('RiskAssessment').implement({
  description: 'A model-drafted assessment of a case (asynchronous: status, then content).',
  fields: draftFields('assessment'),
});

const RiskReportRef = builder.objectRef<RiskDraft>('RiskReport').implement({
  description: 'A model-drafted report of a case; approved through dual control by another key.',
  fields: (t) => ({
    ...draftFields('report')(t),
    approvalId: t.exposeString('approvalId', { nullable: true }),
    approvedBy: t.exposeString('approvedBy', { nullable: true }),
    approvedAt: t.expose('approvedAt', { type: 'UnixSeconds', nullable: true }),
    approval: t.field({
      type: ApprovalRef,
      nullable: true,
      description: 'The latest approval asked for this report (pending, approved, …), or null.',
      resolve: (d, _args, { ctx }) => reportApproval(ctx, d),
    }),
  }),
});

const RiskCaseRef = builder.objectRef<RiskCase>('RiskCase').implement({
  description: 'A Risk case: an assignee works it, a reviewer (never the assignee) checks it.',
  fields: (t) => ({
    id: t.exposeID('id'),
    projectId: t.exposeID('projectId'),
    title: t.exposeString('title'),
    description: t.exposeString('description', { nullable: true }),
    assignee: t.exposeString('assignee'),
    reviewer: t.exposeString('reviewer'),
    status: t.exposeString('status', { description: 'open or closed.' }),
    disposition: t.exposeString('disposition', { nullable: true }),
    closedAt: t.expose('closedAt', { type: 'UnixSeconds', nullable: true }),
    closedBy: t.exposeString('closedBy', { nullable: true }),
    metadata: t.field({ type: 'JSON', resolve: (c) => c.metadata }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    updatedAt: t.expose('updatedAt', { type: 'UnixSeconds' }),
    evidence: t.connection(
      {
        type: RiskEvidenceRef,
        authScopes: { action: 'risk_evidence.list' },
        resolve: (c, args, { ctx }) => serviceConnection(args, (query) => listRiskEvidence(ctx, c.id, query)),
      },
      { name: 'RiskEvidenceConnection' },
      { name: 'RiskEvidenceEdge' },
    ),
    assessments: t.connection(
      {
        type: RiskAssessmentRef,
        authScopes: { action: 'risk_assessment.list' },
        resolve: (c, args, { ctx }) => serviceConnection(args, (query) => listRiskDrafts(ctx, 'assessment', { ...query, case_id: c.id })),
      },
      { name: 'RiskAssessmentConnection' },
      { name: 'RiskAssessmentEdge' },
    ),
    reports: t.connection(
      {
        type: RiskReportRef,
        authScopes: { action: 'risk_report.list' },
        resolve: (c, args, { ctx }) => serviceConnection(args, (query) => listRiskDrafts(ctx, 'report', { ...query, case_id: c.id })),
      },
      { name: 'RiskReportConnection' },
      { name: 'RiskReportEdge' },
    ),
  }),
});

// Metadata (an object of strings) is REST-only for now: GraphQL inputs carry scalar fields.
const CreateRiskCaseInput = inputTypeFrom('CreateRiskCaseInput', CreateRiskCase, { omit: ['metadata'] });
const UpdateRiskCaseInput = inputTypeFrom('UpdateRiskCaseInput', UpdateRiskCase, { omit: ['metadata'] });
const CreateRiskEvidenceInput = inputTypeFrom('CreateRiskEvidenceInput', CreateEvidence, { omit: ['metadata'] });
const UpdateRiskEvidenceInput = inputTypeFrom('UpdateRiskEvidenceInput', UpdateEvidence, { omit: ['metadata'] });

builder.queryFields((t) => ({
  riskCases: t.connection(
    {
      type: RiskCaseRef,
      nullable: true,
      authScopes: { action: 'risk_case.list' },
      description: 'Newest first, as GET /v1/risk/cases.',
      args: { projectId: t.arg.id(), status: t.arg.string() },
      resolve: (_root, args, { ctx }) => serviceConnection(args, (query) => listRiskCases(ctx, { ...query, ...listFilters(args) })),
    },
    { name: 'RiskCaseConnection' },
    { name: 'RiskCaseEdge' },
  ),
  riskCase: t.field({
    type: RiskCaseRef,
    nullable: true,
    authScopes: { action: 'risk_case.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getRiskCase(ctx, String(args.id)),
  }),
  riskEvidence: t.field({
    type: RiskEvidenceRef,
    nullable: true,
    authScopes: { action: 'risk_evidence.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getRiskEvidence(ctx, String(args.id)),
  }),
  riskAssessment: t.field({
    type: RiskAssessmentRef,
    nullable: true,
    authScopes: { action: 'risk_assessment.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getRiskDraft(ctx, 'assessment', String(args.id)),
  }),
  riskReport: t.field({
    type: RiskReportRef,
    nullable: true,
    authScopes: { action: 'risk_report.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getRiskDraft(ctx, 'report', String(args.id)),
  }),
  riskReports: t.connection(
    {
      type: RiskReportRef,
      nullable: true,
      authScopes: { action: 'risk_report.list' },
      args: { projectId: t.arg.id(), caseId: t.arg.id() },
      resolve: (_root, args, { ctx }) => serviceConnection(args, (query) => listRiskDrafts(ctx, 'report', { ...query, ...listFilters(args) })),
    },
    { name: 'RiskReportListConnection' },
    { name: 'RiskReportListEdge' },
  ),
}));

builder.mutationFields((t) => ({
  createRiskCase: t.field({
    type: RiskCaseRef,
    nullable: true,
    authScopes: { action: 'risk_case.create' },
    description: 'The reviewer may not be the assignee (segregation_of_duties). Audits risk_case.create.',
    args: { input: t.arg({ type: CreateRiskCaseInput, required: true }) },
    resolve: (_root, { input }, { ctx }) => createRiskCase(ctx, serviceInput(input)),
  }),
  updateRiskCase: t.field({
    type: RiskCaseRef,
    nullable: true,
    authScopes: { action: 'risk_case.update' },
    description: 'The reviewer may not become the assignee (segregation_of_duties). Audits risk_case.update.',
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateRiskCaseInput, required: true }) },
    resolve: (_root, { id, input }, { ctx }) => updateRiskCase(ctx, String(id), serviceInput(input)),
  }),
  closeRiskCase: t.field({
    type: RiskCaseRef,
    nullable: true,
    authScopes: { action: 'risk_case.close' },
    description: 'Records the disposition (once). Emits risk.case.closed; audits risk_case.close.',
    args: { id: t.arg.id({ required: true }), disposition: t.arg.string({ required: true }), note: t.arg.string() },
    resolve: (_root, { id, ...input }, { ctx }) => closeRiskCase(ctx, String(id), serviceInput(listFilters(input))),
  }),
  addRiskEvidence: t.field({
    type: RiskEvidenceRef,
    nullable: true,
    authScopes: { action: 'risk_evidence.create' },
    description: 'The bytes (base64) are fixed at upload with their SHA-256. Audits risk_evidence.create.',
    args: { caseId: t.arg.id({ required: true }), input: t.arg({ type: CreateRiskEvidenceInput, required: true }) },
    resolve: (_root, { caseId, input }, { ctx }) => addRiskEvidence(ctx, String(caseId), serviceInput(input)),
  }),
  updateRiskEvidence: t.field({
    type: RiskEvidenceRef,
    nullable: true,
    authScopes: { action: 'risk_evidence.update' },
    description: 'Metadata only: new bytes are refused with evidence_immutable. Audits risk_evidence.update.',
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateRiskEvidenceInput, required: true }) },
    resolve: (_root, { id, input }, { ctx }) => updateRiskEvidence(ctx, String(id), serviceInput(input)),
  }),
  requestRiskAssessment: t.field({
    type: RiskAssessmentRef,
    nullable: true,
    authScopes: { action: 'risk_assessment.create' },
    description: 'Queued model work (also needs inference:write); the background worker drafts it. Audits risk_assessment.create.',
    args: { caseId: t.arg.id({ required: true }), instructions: t.arg.string() },
    resolve: (_root, { caseId, ...input }, { ctx }) => requestRiskDraft(ctx, 'assessment', String(caseId), listFilters(input)),
  }),
  requestRiskReport: t.field({
    type: RiskReportRef,
    nullable: true,
    authScopes: { action: 'risk_report.create' },
    description: 'Queued model work (also needs inference:write); the background worker drafts it. Audits risk_report.create.',
    args: { caseId: t.arg.id({ required: true }), instructions: t.arg.string() },
    resolve: (_root, { caseId, ...input }, { ctx }) => requestRiskDraft(ctx, 'report', String(caseId), listFilters(input)),
  }),
  approveRiskReport: t.field({
    type: RiskReportRef,
    nullable: true,
    authScopes: { action: 'risk_report.approve' },
    description:
      'Always dual control: answers dual_control_required with an approval that another key (governance:manage or risk:approve) approves with approveApproval; then emits risk.report.approved.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, { ctx }) => approveRiskReport(ctx, String(id), {}),
  }),
}));
