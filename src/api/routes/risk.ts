import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { RiskCase, RiskDraft } from '../../generated/prisma/client.ts';
import { unixOrNull, unixSeconds } from '../../domain/context.ts';
import { approveRiskReport } from '../../domain/governance/guarded.ts';
import {
  addRiskEvidence,
  closeRiskCase,
  createRiskCase,
  getRiskCase,
  getRiskDraft,
  getRiskEvidence,
  getRiskEvidenceContent,
  listRiskCases,
  listRiskDrafts,
  listRiskEvidence,
  requestRiskDraft,
  updateRiskCase,
  updateRiskEvidence,
  type DraftKind,
  type RiskEvidence,
} from '../../domain/risk/service.ts';
import {
  AssessmentIdParams,
  CaseIdParams,
  CloseRiskCase,
  CreateEvidence,
  CreateRiskCase,
  DraftRequest,
  EvidenceIdParams,
  ListDraftsQuery,
  ListEvidenceQuery,
  ListRiskCasesQuery,
  ProjectOnly,
  ReportIdParams,
  UpdateEvidence,
  UpdateRiskCase,
} from '../../domain/risk/schema.ts';
import { Type, type Static } from 'typebox';
import { ListOf, sendList } from '../list.ts';
import { Int, Json, NullableStr, ObjectType, Str, Unix, UnixOrNull } from '../response-fields.ts';

const RiskCaseBody = Type.Object(
  {
    id: Str('The case id.'),
    object: ObjectType('svc.risk.case'),
    project_id: Str('The project it belongs to.'),
    title: Str('Its title.'),
    description: NullableStr('What it is about, or null.'),
    assignee: Str('Who works it.'),
    reviewer: Str('Who reviews it (never the assignee).'),
    status: Str('Its status (open, in_review, closed…).'),
    disposition: NullableStr('How it was closed, or null.'),
    closed_at: UnixOrNull('Closed'),
    closed_by: NullableStr('Who closed it, or null.'),
    metadata: Json('The metadata given (a JSON object).'),
    created_at: Unix('Created'),
    updated_at: Unix('Last changed'),
  },
  { description: 'A risk case.' },
);

const RiskEvidenceBody = Type.Object(
  {
    id: Str('The evidence id.'),
    object: ObjectType('svc.risk.evidence'),
    project_id: Str('The project it belongs to.'),
    case_id: Str('The case.'),
    name: Str('Its name.'),
    content_type: Str('The content type of its bytes.'),
    size: Int('Its size, in bytes.'),
    sha256: Str('SHA-256 of its bytes, hex, fixed at upload.'),
    description: NullableStr('What it shows, or null.'),
    metadata: Json('The metadata given (a JSON object).'),
    created_at: Unix('Uploaded'),
    updated_at: Unix('Last changed'),
  },
  { description: 'Evidence, without its bytes (GET …/content reads them).' },
);

const draftFields = (object: 'svc.risk.assessment' | 'svc.risk.report') => ({
  id: Str('The draft id.'),
  object: ObjectType(object),
  project_id: Str('The project it belongs to.'),
  case_id: Str('The case.'),
  status: Str('queued, running, completed or failed.'),
  instructions: NullableStr('Instructions given, or null.'),
  content: Json("The model's draft; null until completed."),
  error: Json("A failed draft's why, {code, message}, or null."),
  created_by: Str('Who asked for it (a key or operator id).'),
  created_at: Unix('Requested'),
  completed_at: UnixOrNull('Finished'),
});
const RiskAssessment = Type.Object(draftFields('svc.risk.assessment'), { description: 'A model-drafted risk assessment (rsa_).' });
const RiskReport = Type.Object(
  {
    ...draftFields('svc.risk.report'),
    approval_id: NullableStr('The approval deciding it, or null.'),
    approved_by: NullableStr('Who approved it, or null.'),
    approved_at: UnixOrNull('Approved'),
  },
  { description: 'A model-drafted risk report (rpt_), approved by dual control.' },
);

export function presentRiskCase(c: RiskCase) {
  return {
    id: c.id,
    object: 'svc.risk.case' as const,
    project_id: c.projectId,
    title: c.title,
    description: c.description,
    assignee: c.assignee,
    reviewer: c.reviewer,
    status: c.status,
    disposition: c.disposition,
    closed_at: unixOrNull(c.closedAt),
    closed_by: c.closedBy,
    metadata: c.metadata,
    created_at: unixSeconds(c.createdAt),
    updated_at: unixSeconds(c.updatedAt),
  };
}

/** Evidence without its bytes: their SHA-256 and size, fixed at upload. */
export function presentRiskEvidence(e: RiskEvidence) {
  return {
    id: e.id,
    object: 'svc.risk.evidence' as const,
    project_id: e.projectId,
    case_id: e.caseId,
    name: e.name,
    content_type: e.contentType,
    size: e.size,
    sha256: e.sha256,
    description: e.description,
    metadata: e.metadata,
    created_at: unixSeconds(e.createdAt),
    updated_at: unixSeconds(e.updatedAt),
  };
}

export function presentRiskDraft(d: RiskDraft) {
  const base = {
    id: d.id,
    object: d.kind === 'report' ? ('svc.risk.report' as const) : ('svc.risk.assessment' as const),
    project_id: d.projectId,
    case_id: d.caseId,
    status: d.status,
    instructions: d.instructions,
    content: d.content ?? null,
    error: d.error ?? null,
    created_by: d.createdBy,
    created_at: unixSeconds(d.createdAt),
    completed_at: unixOrNull(d.completedAt),
  };
  if (d.kind !== 'report') return base;
  return { ...base, approval_id: d.approvalId, approved_by: d.approvedBy, approved_at: unixOrNull(d.approvedAt) };
}

const draftRoutes = (kind: DraftKind) => (kind === 'assessment' ? 'assessments' : 'reports');

/** CONTRACT §16, Risk: cases, evidence, model-drafted assessments and reports (reports approved by dual control). */
export const riskRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/v1/risk/cases', { config: { action: 'risk_case.create' }, schema: { body: CreateRiskCase, response: { 200: RiskCaseBody } } }, async (req) => presentRiskCase(await createRiskCase(req.ctx, req.body)));
  app.get('/v1/risk/cases', { config: { action: 'risk_case.list' }, schema: { querystring: ListRiskCasesQuery, response: { 200: ListOf(RiskCaseBody) } } }, async (req, reply) =>
    sendList(reply, await listRiskCases(req.ctx, req.query), '/v1/risk/cases', presentRiskCase),
  );
  app.get('/v1/risk/cases/:case_id', { config: { action: 'risk_case.read' }, schema: { params: CaseIdParams, response: { 200: RiskCaseBody } } }, async (req) => presentRiskCase(await getRiskCase(req.ctx, req.params.case_id)));
  app.patch('/v1/risk/cases/:case_id', { config: { action: 'risk_case.update' }, schema: { params: CaseIdParams, body: UpdateRiskCase, response: { 200: RiskCaseBody } } }, async (req) =>
    presentRiskCase(await updateRiskCase(req.ctx, req.params.case_id, req.body)),
  );
  app.post('/v1/risk/cases/:case_id/close', { config: { action: 'risk_case.close' }, schema: { params: CaseIdParams, body: CloseRiskCase, response: { 200: RiskCaseBody } } }, async (req) =>
    presentRiskCase(await closeRiskCase(req.ctx, req.params.case_id, req.body)),
  );

  app.post('/v1/risk/cases/:case_id/evidence', { config: { action: 'risk_evidence.create' }, schema: { params: CaseIdParams, body: CreateEvidence, response: { 200: RiskEvidenceBody } } }, async (req) =>
    presentRiskEvidence(await addRiskEvidence(req.ctx, req.params.case_id, req.body)),
  );
  app.get('/v1/risk/cases/:case_id/evidence', { config: { action: 'risk_evidence.list' }, schema: { params: CaseIdParams, querystring: ListEvidenceQuery, response: { 200: ListOf(RiskEvidenceBody) } } }, async (req, reply) =>
    sendList(reply, await listRiskEvidence(req.ctx, req.params.case_id, req.query), `/v1/risk/cases/${req.params.case_id}/evidence`, presentRiskEvidence),
  );
  app.get('/v1/risk/evidence/:evidence_id', { config: { action: 'risk_evidence.read' }, schema: { params: EvidenceIdParams, response: { 200: RiskEvidenceBody } } }, async (req) =>
    presentRiskEvidence(await getRiskEvidence(req.ctx, req.params.evidence_id)),
  );
  // The bytes as uploaded; X-Svc-Evidence-Sha256 is the hash fixed at upload. Served as a download, never rendered.
  const EvidenceContent = {
    description: 'The file as uploaded, with its own Content-Type, as an attachment; X-Svc-Evidence-SHA256 names its SHA-256.',
    content: { '*/*': { schema: Type.String({ format: 'binary' }) } },
  };
  app.get('/v1/risk/evidence/:evidence_id/content', { config: { action: 'risk_evidence.read' }, schema: { params: EvidenceIdParams, response: { 200: EvidenceContent } } }, async (req, reply) => {
    const { evidence, content } = await getRiskEvidenceContent(req.ctx, req.params.evidence_id);
    return reply
      .header('content-type', evidence.contentType)
      .header('content-disposition', 'attachment')
      .header('x-content-type-options', 'nosniff')
      .header('x-svc-evidence-sha256', evidence.sha256)
      // The bytes as stored (the response schema only describes them: a Buffer is sent as it is, never serialized).
      .send(content as never);
  });
  app.patch('/v1/risk/evidence/:evidence_id', { config: { action: 'risk_evidence.update' }, schema: { params: EvidenceIdParams, body: UpdateEvidence, response: { 200: RiskEvidenceBody } } }, async (req) =>
    presentRiskEvidence(await updateRiskEvidence(req.ctx, req.params.evidence_id, req.body)),
  );

  for (const kind of ['assessment', 'report'] as const) {
    const plural = draftRoutes(kind);
    const Params = kind === 'assessment' ? AssessmentIdParams : ReportIdParams;
    const param = kind === 'assessment' ? 'assessment_id' : 'report_id';
    const Draft = kind === 'assessment' ? RiskAssessment : RiskReport;
    app.post(`/v1/risk/cases/:case_id/${plural}`, { config: { action: `risk_${kind}.create` }, schema: { params: CaseIdParams, body: DraftRequest, response: { 200: Draft } } }, async (req) =>
      presentRiskDraft(await requestRiskDraft(req.ctx, kind, req.params.case_id, req.body ?? {})),
    );
    app.get(`/v1/risk/${plural}`, { config: { action: `risk_${kind}.list` }, schema: { querystring: ListDraftsQuery, response: { 200: ListOf(Draft) } } }, async (req, reply) =>
      sendList(reply, await listRiskDrafts(req.ctx, kind, req.query), `/v1/risk/${plural}`, presentRiskDraft),
    );
    app.get(`/v1/risk/${plural}/:${param}`, { config: { action: `risk_${kind}.read` }, schema: { params: Params, response: { 200: Draft } } }, async (req) =>
      presentRiskDraft(await getRiskDraft(req.ctx, kind, (req.params as Record<string, string>)[param]!)),
    );
  }

  // Always answered 403 dual_control_required with the approval another key decides (POST /v1/approvals/{id}/approve).
  app.post('/v1/risk/reports/:report_id/approve', { config: { action: 'risk_report.approve' }, schema: { params: ReportIdParams, body: ProjectOnly, response: { 200: RiskReport } } }, async (req) =>
    presentRiskDraft(await approveRiskReport(req.ctx, req.params.report_id, req.body ?? {})) as Static<typeof RiskReport>,
  );
};
