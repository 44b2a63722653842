import { createHash } from 'node:crypto';
import type { Prisma, RiskCase, RiskDraft, RiskEvidence as RiskEvidenceRow } from '../../generated/prisma/client.ts';
import type { Tx } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import { normalizeName, parseInput, storedNameFold } from '../validation.ts';
import { recordAudit } from '../audit/service.ts';
import { ownTransaction, addressed, visibleProjectId, type Ctx, type Checked } from '../context.ts';
import { enqueueEvent } from '../events/outbox.ts';
import { pageById, type Page } from '../pagination.ts';
import { assertMayRunModelWork, notFound, readProject, writeProject } from '../verticals/access.ts';
import { enqueueWork } from '../verticals/work.ts';
import {
  CloseRiskCase,
  CreateEvidence,
  CreateRiskCase,
  DraftRequest,
  ListDraftsQuery,
  ListEvidenceQuery,
  ListRiskCasesQuery,
  UpdateEvidence,
  UpdateRiskCase,
} from './schema.ts';

export type DraftKind = 'assessment' | 'report';
/** Evidence as reads and writes return it: without its bytes (up to 5 MB each), which only the content read loads. */
export type RiskEvidence = Omit<RiskEvidenceRow, 'content'>;
const NO_BYTES = { content: true } as const;
const DRAFT_PREFIX = { assessment: 'rsa', report: 'rpt' } as const;
const DRAFT_PARAM = { assessment: 'assessment_id', report: 'report_id' } as const;

/** The longest assignee or reviewer name, in characters (code points), as the schema's Text(200). */
const MAX_PERSON_CHARS = 200;

/**
 * A person of a case (assignee, reviewer) as stored: the key names' rule (domain/validation.ts): NFC, trimmed, invisible
 * or text-direction characters and mixed lookalike scripts refused (400 invalid_request naming the field).
 */
const person = (raw: string, param: 'assignee' | 'reviewer'): string => normalizeName(raw, param, MAX_PERSON_CHARS);

/**
 * CONTRACT §16: the assignee works the case, the reviewer checks it; one person cannot do both. People are compared
 * as key names are (NFKC, case-folded): "é" and "e\u0301", "alice" and "ＡＬＩＣＥ" are one person. A stored name that
 * predates the rule is folded without its invisible characters.
 */
function assertSegregated(assignee: string, reviewer: string): void {
  if (storedNameFold(assignee) === storedNameFold(reviewer)) {
    throw new SvcError('segregation_of_duties', { param: 'reviewer', message: 'The reviewer of a case cannot be its assignee.' });
  }
}

/** The filters, plus the project's when the caller is confined to one (the operator reads any). */
const listWhere = <W extends object>(projectId: string | undefined, extra: W): W & { projectId?: string } => ({
  ...(projectId !== undefined ? { projectId } : {}),
  ...extra,
});

// ---- cases ----

/** Audits risk_case.create. */
export async function createRiskCase(ctx: Ctx, raw: unknown): Promise<RiskCase> {
  const parsed = parseInput(CreateRiskCase, raw);
  const input = { ...parsed, assignee: person(parsed.assignee, 'assignee'), reviewer: person(parsed.reviewer, 'reviewer') };
  assertSegregated(input.assignee, input.reviewer);
  const projectId = await writeProject(ctx, input.project_id);
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const row = await tx.riskCase.create({
      data: {
        id: newId('cas', now.getTime()),
        projectId,
        title: input.title,
        description: input.description ?? null,
        assignee: input.assignee,
        reviewer: input.reviewer,
        metadata: input.metadata ?? {},
        createdAt: now,
        updatedAt: now,
      },
    });
    await recordAudit(tx, ctx, 'risk_case.create', { projectId, targetId: row.id, data: { title: row.title, assignee: row.assignee, reviewer: row.reviewer } });
    return row;
  });
}

export async function listRiskCases(ctx: Ctx, raw: unknown): Promise<Page<RiskCase>> {
  const query = parseInput(ListRiskCasesQuery, raw);
  const projectId = await visibleProjectId(ctx, query.project_id);
  const where: Prisma.RiskCaseWhereInput = listWhere(projectId, query.status ? { status: query.status } : {});
  return pageById(query, ctx.db.riskCase, where);
}

export async function getRiskCase(ctx: Ctx, caseId: string): Promise<RiskCase> {
  const projectId = await readProject(ctx);
  const row = await ctx.db.riskCase.findFirst({ where: listWhere(projectId, { id: caseId }) });
  if (!row) throw notFound('case_id', 'case');
  addressed(ctx, row.projectId);
  return row;
}

async function openCase(ctx: Ctx, caseId: string): Promise<RiskCase> {
  const c = await getRiskCase(ctx, caseId);
  if (c.status !== 'open') throw invalid('case_id', 'This case is closed: nothing more can be added to it.');
  return c;
}

/** Audits risk_case.update; a change that makes the assignee the reviewer is 409 segregation_of_duties. */
export async function updateRiskCase(ctx: Ctx, caseId: string, raw: unknown): Promise<RiskCase> {
  const parsed = parseInput(UpdateRiskCase, raw);
  const input = {
    ...parsed,
    ...(parsed.assignee !== undefined ? { assignee: person(parsed.assignee, 'assignee') } : {}),
    ...(parsed.reviewer !== undefined ? { reviewer: person(parsed.reviewer, 'reviewer') } : {}),
  };
  const found = await getRiskCase(ctx, caseId);
  assertSegregated(input.assignee ?? found.assignee, input.reviewer ?? found.reviewer);
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const row = await tx.riskCase.update({
      where: { id: found.id },
      data: {
        ...(input.title !== undefined ? { title: input.title } : {}),
        ...(input.description !== undefined ? { description: input.description } : {}),
        ...(input.assignee !== undefined ? { assignee: input.assignee } : {}),
        ...(input.reviewer !== undefined ? { reviewer: input.reviewer } : {}),
        ...(input.metadata !== undefined ? { metadata: input.metadata } : {}),
        updatedAt: now,
      },
    });
    const { project_id: _p, ...changes } = input;
    await recordAudit(tx, ctx, 'risk_case.update', { projectId: row.projectId, targetId: row.id, data: changes });
    return row;
  });
}

/**
 * Records the disposition: audits risk_case.close and emits risk.case.closed, once. Closing a closed case returns it
 * unchanged (with its first disposition).
 */
export async function closeRiskCase(ctx: Ctx, caseId: string, raw: unknown): Promise<RiskCase> {
  const input = parseInput(CloseRiskCase, raw);
  const found = await getRiskCase(ctx, caseId);
  if (found.status === 'closed') return found;
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const { count } = await tx.riskCase.updateMany({
      where: { id: found.id, status: 'open' },
      data: { status: 'closed', disposition: input.disposition, closedAt: now, closedBy: ctx.caller.keyId, updatedAt: now },
    });
    const row = (await tx.riskCase.findUnique({ where: { id: found.id } }))!;
    if (count === 0) return row; // closed by another request meanwhile
    await recordAudit(tx, ctx, 'risk_case.close', { projectId: row.projectId, targetId: row.id, data: { disposition: input.disposition, note: input.note ?? null } });
    await enqueueEvent(tx, now, row.projectId, 'risk.case.closed', {
      case_id: row.id,
      title: row.title,
      disposition: input.disposition,
      closed_by: ctx.caller.keyId,
    });
    return row;
  });
}

// ---- evidence ----

/** The bytes are fixed here, with their SHA-256. Audits risk_evidence.create (the hash, never the bytes). */
export async function addRiskEvidence(ctx: Ctx, caseId: string, raw: unknown): Promise<RiskEvidence> {
  const input = parseInput(CreateEvidence, raw);
  const c = await openCase(ctx, caseId);
  const bytes = Buffer.from(input.content_base64, 'base64');
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const row = await tx.riskEvidence.create({
      omit: NO_BYTES,
      data: {
        id: newId('evi', now.getTime()),
        projectId: c.projectId,
        caseId: c.id,
        name: input.name,
        contentType: input.content_type ?? 'application/octet-stream',
        content: bytes,
        sha256,
        size: bytes.length,
        description: input.description ?? null,
        metadata: input.metadata ?? {},
        createdAt: now,
        updatedAt: now,
      },
    });
    await recordAudit(tx, ctx, 'risk_evidence.create', { projectId: c.projectId, targetId: row.id, data: { case_id: c.id, name: row.name, sha256, size: row.size } });
    return row;
  });
}

export async function listRiskEvidence(ctx: Ctx, caseId: string, raw: unknown): Promise<Page<RiskEvidence>> {
  const query = parseInput(ListEvidenceQuery, raw);
  const c = await getRiskCase(ctx, caseId);
  const where: Prisma.RiskEvidenceWhereInput = { projectId: c.projectId, caseId: c.id };
  return pageById(query, ctx.db.riskEvidence, where, { omit: NO_BYTES });
}

export async function getRiskEvidence(ctx: Ctx, evidenceId: string): Promise<RiskEvidence> {
  const projectId = await readProject(ctx);
  const row = await ctx.db.riskEvidence.findFirst({ where: listWhere(projectId, { id: evidenceId }), omit: NO_BYTES });
  if (!row) throw notFound('evidence_id', 'evidence');
  addressed(ctx, row.projectId);
  return row;
}

/** The bytes as uploaded, with their type and SHA-256 (for the caller to verify). */
export async function getRiskEvidenceContent(ctx: Ctx, evidenceId: string): Promise<{ evidence: RiskEvidence; content: Buffer }> {
  const evidence = await getRiskEvidence(ctx, evidenceId);
  const row = await ctx.db.riskEvidence.findUniqueOrThrow({ where: { id: evidence.id }, select: { content: true } });
  return { evidence, content: Buffer.from(row.content) };
}

/** Metadata only: a change of the bytes (or their type) is 409 evidence_immutable. Audits risk_evidence.update. */
export async function updateRiskEvidence(ctx: Ctx, evidenceId: string, raw: unknown): Promise<RiskEvidence> {
  const input = parseInput(UpdateEvidence, raw);
  const found = await getRiskEvidence(ctx, evidenceId);
  for (const field of ['content_base64', 'content_type'] as const) {
    if (input[field] !== undefined) {
      throw new SvcError('evidence_immutable', {
        param: field,
        message: `Evidence bytes are fixed at upload (SHA-256 ${found.sha256}); upload new evidence instead.`,
      });
    }
  }
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const row = await tx.riskEvidence.update({
      where: { id: found.id },
      omit: NO_BYTES,
      data: {
        ...(input.name !== undefined ? { name: input.name } : {}),
        ...(input.description !== undefined ? { description: input.description } : {}),
        ...(input.metadata !== undefined ? { metadata: input.metadata } : {}),
        updatedAt: now,
      },
    });
    const { project_id: _p, ...changes } = input;
    await recordAudit(tx, ctx, 'risk_evidence.update', { projectId: row.projectId, targetId: row.id, data: changes });
    return row;
  });
}

// ---- assessments and reports (model work) ----

/**
 * Queues a model-drafted assessment or report of an open case (status `queued`; the worker fills it in as the calling
 * key, through the inference pipeline). Audits risk_assessment.create / risk_report.create.
 */
export async function requestRiskDraft(ctx: Ctx, kind: DraftKind, caseId: string, raw: unknown): Promise<RiskDraft> {
  const input = parseInput(DraftRequest, raw ?? {});
  assertMayRunModelWork(ctx);
  const c = await openCase(ctx, caseId);
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const id = newId(DRAFT_PREFIX[kind], now.getTime());
    const jobId = await enqueueWork(tx, ctx, { projectId: c.projectId, kind: `risk.${kind}`, subjectId: id });
    const row = await tx.riskDraft.create({
      data: { id, projectId: c.projectId, caseId: c.id, kind, status: 'queued', instructions: input.instructions ?? null, jobId, createdBy: ctx.caller.keyId, createdAt: now },
    });
    await recordAudit(tx, ctx, kind === 'assessment' ? 'risk_assessment.create' : 'risk_report.create', { projectId: c.projectId, targetId: id, data: { case_id: c.id, job_id: jobId } });
    return row;
  });
}

export async function listRiskDrafts(ctx: Ctx, kind: DraftKind, raw: unknown): Promise<Page<RiskDraft>> {
  const query = parseInput(ListDraftsQuery, raw);
  const projectId = await visibleProjectId(ctx, query.project_id);
  const where: Prisma.RiskDraftWhereInput = listWhere(projectId, { kind, ...(query.case_id ? { caseId: query.case_id } : {}) });
  return pageById(query, ctx.db.riskDraft, where);
}

export async function getRiskDraft(ctx: Ctx, kind: DraftKind, draftId: string): Promise<RiskDraft> {
  const projectId = await readProject(ctx);
  const row = await ctx.db.riskDraft.findFirst({ where: listWhere(projectId, { id: draftId, kind }) });
  if (!row) throw notFound(DRAFT_PARAM[kind], kind);
  addressed(ctx, row.projectId);
  return row;
}

/** The approval being applied now: its claim comes first in the transaction applyRiskReportApproval is given. */
async function applyingApproval(tx: Tx, projectId: string, reportId: string) {
  return tx.approval.findFirst({
    where: { projectId, action: 'risk_report.approve', status: 'approved', resultId: null, args: { path: ['params', 'report_id'], equals: reportId } },
    orderBy: { decidedAt: 'desc' },
  });
}

export interface RiskReportApproval extends Checked {
  report: RiskDraft;
}

/** approveRiskReport's validation (the report is visible and drafted, not yet approved), writing nothing. */
export async function checkRiskReportApproval(ctx: Ctx, reportId: string, raw: unknown = {}): Promise<RiskReportApproval> {
  parseInput(DraftRequest, raw ?? {});
  const found = await getRiskDraft(ctx, 'report', reportId);
  if (found.status === 'approved') throw invalid('report_id', 'This report is already approved.');
  if (found.status !== 'completed') throw invalid('report_id', `This report is ${found.status}: only a drafted (completed) report can be approved.`);
  return { projectId: found.projectId, report: found };
}

/** approveRiskReport's change, as checkRiskReportApproval validated it (conditional on the report being still drafted). */
export async function applyRiskReportApproval(ctx: Ctx, { report: found }: RiskReportApproval, transact = ownTransaction(ctx)): Promise<RiskDraft> {
  const now = ctx.now();
  return transact(async (tx) => {
    const approval = await applyingApproval(tx, found.projectId, found.id);
    const { count } = await tx.riskDraft.updateMany({
      where: { id: found.id, status: 'completed' },
      data: { status: 'approved', approvalId: approval?.id ?? null, approvedBy: approval?.decidedBy ?? null, approvedAt: now },
    });
    if (count === 0) throw invalid('report_id', 'This report was approved by another request at the same time.');
    const row = (await tx.riskDraft.findUnique({ where: { id: found.id } }))!;
    await recordAudit(tx, ctx, 'risk_report.approve', { projectId: row.projectId, targetId: row.id, data: { case_id: row.caseId, approval_id: row.approvalId } });
    await enqueueEvent(tx, now, row.projectId, 'risk.report.approved', {
      report_id: row.id,
      case_id: row.caseId,
      approval_id: row.approvalId,
      requested_by: ctx.caller.keyId,
      approved_by: row.approvedBy,
    });
    return row;
  });
}

/**
 * Always under dual control (domain/governance/guarded.ts: approveRiskReport): the call answers 403
 * dual_control_required with an approval, and this runs when another key (governance:manage or risk:approve) approves
 * it: the report becomes `approved`, audited risk_report.approve, and risk.report.approved is emitted.
 */
export async function approveRiskReport(ctx: Ctx, reportId: string, raw: unknown = {}): Promise<RiskDraft> {
  return applyRiskReportApproval(ctx, await checkRiskReportApproval(ctx, reportId, raw));
}

/** The latest approval asked for a report (its dual control state for the console), or null. */
export async function reportApproval(ctx: Ctx, report: RiskDraft) {
  if (report.kind !== 'report') return null;
  return ctx.db.approval.findFirst({
    where: { projectId: report.projectId, action: 'risk_report.approve', args: { path: ['params', 'report_id'], equals: report.id } },
    orderBy: { id: 'desc' },
  });
}
