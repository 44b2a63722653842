import { createHash } from 'node:crypto';
import type { LegalContract as LegalContractRow, LegalDraft, LegalMatter, Prisma } from '../../generated/prisma/client.ts';
import type { Tx } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import { recordAudit } from '../audit/service.ts';
import { addressed, visibleProjectId, type Ctx } from '../context.ts';
import { pageById, type Page } from '../pagination.ts';
import { extractDocumentText } from '../rag/extract.ts';
import { documentLimitOf, showBytes } from '../rag/limits.ts';
import type { ContentType } from '../rag/schema.ts';
import { parseInput } from '../validation.ts';
import { assertMayRunModelWork, notFound, readProject, writeProject } from '../verticals/access.ts';
import { enqueueWork } from '../verticals/work.ts';
import type { MappedField, MappingResult, RedlineResult } from './checks.ts';
import { CloseMatter, CreateContract, CreateMatter, ListMattersQuery, ListQuery, RequestMapping, RequestRedline, UpdateMatter } from './schema.ts';

/** A contract as reads and writes return it: without its text, which only the text read loads. */
export type LegalContract = Omit<LegalContractRow, 'text'>;
const NO_TEXT = { text: true } as const;

export type LegalDraftKind = 'mapping' | 'redline';
const DRAFT_PREFIX = { mapping: 'map', redline: 'red' } as const;
const DRAFT_PARAM = { mapping: 'mapping_id', redline: 'redline_id' } as const;

/** The filters, plus the project's when the caller is confined to one (the operator reads any). */
const only = <W extends object>(projectId: string | undefined, extra: W): W & { projectId?: string } => ({
  ...(projectId !== undefined ? { projectId } : {}),
  ...extra,
});

/** CONTRACT §16: any write under a closed matter. */
const matterClosed = (m: Pick<LegalMatter, 'id' | 'closedAt'>) =>
  new SvcError('matter_closed', {
    param: 'matter_id',
    message: `The matter ${m.id} is closed${m.closedAt ? ` (since ${m.closedAt.toISOString()})` : ''}: it takes no more changes, contracts, mappings or redlines.`,
  });

/**
 * In the write's transaction: locks the matter's row and checks it is still open, so that a close committed meanwhile
 * (which takes the same row) is seen, and a close that comes after waits for this write. Work queued by a write that
 * got here first still runs after the close: the close freezes new writes only.
 */
async function lockOpenMatter(tx: Tx, matter: LegalMatter): Promise<void> {
  const rows = await tx.$queryRaw<{ status: string; closed_at: Date | null }[]>`
    SELECT status, closed_at FROM legal_matters WHERE id = ${matter.id} FOR UPDATE`;
  if (rows[0]?.status !== 'open') throw matterClosed({ id: matter.id, closedAt: rows[0]?.closed_at ?? matter.closedAt });
}

// ---- matters ----

/** Audits legal_matter.create. */
export async function createMatter(ctx: Ctx, raw: unknown): Promise<LegalMatter> {
  const input = parseInput(CreateMatter, raw);
  const projectId = await writeProject(ctx, input.project_id);
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const row = await tx.legalMatter.create({
      data: {
        id: newId('mat', now.getTime()),
        projectId,
        name: input.name,
        client: input.client ?? null,
        description: input.description ?? null,
        createdAt: now,
        updatedAt: now,
      },
    });
    await recordAudit(tx, ctx, 'legal_matter.create', { projectId, targetId: row.id, data: { name: row.name, client: row.client } });
    return row;
  });
}

export async function listMatters(ctx: Ctx, raw: unknown): Promise<Page<LegalMatter>> {
  const query = parseInput(ListMattersQuery, raw);
  const projectId = await visibleProjectId(ctx, query.project_id);
  return pageById(query, ctx.db.legalMatter, only(projectId, query.status ? { status: query.status } : {}));
}

/** Another project's matter looks absent (404). */
export async function getMatter(ctx: Ctx, matterId: string): Promise<LegalMatter> {
  const row = await ctx.db.legalMatter.findFirst({ where: only(await readProject(ctx), { id: matterId }) });
  if (!row) throw notFound('matter_id', 'matter');
  addressed(ctx, row.projectId);
  return row;
}

async function openMatter(ctx: Ctx, matterId: string): Promise<LegalMatter> {
  const m = await getMatter(ctx, matterId);
  if (m.status !== 'open') throw matterClosed(m);
  return m;
}

/** Only while open (409 matter_closed). Audits legal_matter.update. */
export async function updateMatter(ctx: Ctx, matterId: string, raw: unknown): Promise<LegalMatter> {
  const input = parseInput(UpdateMatter, raw);
  const found = await openMatter(ctx, matterId);
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const { count } = await tx.legalMatter.updateMany({
      where: { id: found.id, status: 'open' },
      data: {
        ...(input.name !== undefined ? { name: input.name } : {}),
        ...(input.client !== undefined ? { client: input.client } : {}),
        ...(input.description !== undefined ? { description: input.description } : {}),
        updatedAt: now,
      },
    });
    const row = (await tx.legalMatter.findUnique({ where: { id: found.id } }))!;
    if (count === 0) throw matterClosed(row); // closed by another request meanwhile
    const { project_id: _p, ...changes } = input;
    await recordAudit(tx, ctx, 'legal_matter.update', { projectId: row.projectId, targetId: row.id, data: changes });
    return row;
  });
}

/**
 * Closes the matter: from then on every write under it is 409 matter_closed. Closing a closed matter returns it
 * unchanged (with its first close), as revoking a revoked key does. Audits legal_matter.close, once.
 */
export async function closeMatter(ctx: Ctx, matterId: string, raw: unknown): Promise<LegalMatter> {
  const input = parseInput(CloseMatter, raw ?? {});
  const found = await getMatter(ctx, matterId);
  if (found.status === 'closed') return found;
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const { count } = await tx.legalMatter.updateMany({
      where: { id: found.id, status: 'open' },
      data: { status: 'closed', closedAt: now, closedBy: ctx.caller.keyId, closeReason: input.reason ?? null, updatedAt: now },
    });
    const row = (await tx.legalMatter.findUnique({ where: { id: found.id } }))!;
    if (count === 0) return row; // closed by another request meanwhile
    await recordAudit(tx, ctx, 'legal_matter.close', { projectId: row.projectId, targetId: row.id, data: { reason: input.reason ?? null } });
    return row;
  });
}

// ---- contracts ----

/** One contract upload, from JSON or from a multipart form (the adapter read the file). */
export interface ContractUpload {
  name: string;
  contentType: ContentType;
  /** The content as sent: a string (JSON) or the file's bytes. */
  data: string | Uint8Array;
  /** Bytes of the upload: the file's, or the content's UTF-8. */
  bytes: number;
  /** The field a size or content error names: `content` (JSON) or `file` (multipart). */
  param: 'content' | 'file';
}

/** POST /v1/legal/matters/{matter_id}/contracts as JSON, GraphQL createLegalContract. */
export function createContractJson(ctx: Ctx, matterId: string, raw: unknown): Promise<LegalContract> {
  const input = parseInput(CreateContract, raw);
  return createContract(ctx, matterId, {
    name: input.name,
    contentType: input.content_type ?? 'text/plain',
    data: input.content,
    bytes: Buffer.byteLength(input.content, 'utf8'),
    param: 'content',
  });
}

/**
 * Adds a contract to an open matter (409 matter_closed otherwise). The upload is held to the plan's document limit,
 * as a RAG document is (CONTRACT §13: starter 1 MB, growth 10 MB, enterprise 50 MB; over it 413 document_too_large),
 * and its text extracted the same way (rag/extract.ts: PDF through unpdf, HTML through html-to-text). The text is
 * fixed from then on, with its SHA-256. Audits legal_contract.create (never the text).
 */
export async function createContract(ctx: Ctx, matterId: string, up: ContractUpload): Promise<LegalContract> {
  const matter = await openMatter(ctx, matterId);
  const project = await ctx.db.project.findUnique({ where: { id: matter.projectId }, select: { plan: true } });
  const limit = documentLimitOf(project?.plan ?? 'starter');
  if (up.bytes > limit) {
    throw new SvcError('document_too_large', {
      param: up.param,
      message: `The contract is ${up.bytes} bytes; the ${project?.plan ?? 'starter'} plan accepts documents of up to ${showBytes(limit)} (${limit} bytes).`,
    });
  }
  const text = await extractDocumentText(up.contentType, up.data, up.param, { maxTextBytes: limit });
  if (!/\S/.test(text)) throw invalid(up.param, 'The contract has no text.');
  const sha256 = createHash('sha256').update(text).digest('hex');
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    await lockOpenMatter(tx, matter);
    const row = await tx.legalContract.create({
      omit: NO_TEXT,
      data: {
        id: newId('ctr', now.getTime()),
        projectId: matter.projectId,
        matterId: matter.id,
        name: up.name,
        contentType: up.contentType,
        bytes: up.bytes,
        text,
        characters: text.length,
        sha256,
        createdBy: ctx.caller.keyId,
        createdAt: now,
      },
    });
    await recordAudit(tx, ctx, 'legal_contract.create', {
      projectId: matter.projectId,
      targetId: row.id,
      data: { matter_id: matter.id, name: row.name, content_type: row.contentType, bytes: row.bytes, sha256 },
    });
    return row;
  });
}

export async function listContracts(ctx: Ctx, matterId: string, raw: unknown): Promise<Page<LegalContract>> {
  const query = parseInput(ListQuery, raw);
  const matter = await getMatter(ctx, matterId);
  const where: Prisma.LegalContractWhereInput = { projectId: matter.projectId, matterId: matter.id };
  return pageById(query, ctx.db.legalContract, where, { omit: NO_TEXT });
}

export async function getContract(ctx: Ctx, contractId: string): Promise<LegalContract> {
  const row = await ctx.db.legalContract.findFirst({ where: only(await readProject(ctx), { id: contractId }), omit: NO_TEXT });
  if (!row) throw notFound('contract_id', 'contract');
  addressed(ctx, row.projectId);
  return row;
}

/** The contract's extracted text: what the model reads, quotes are checked against and redlines are diffed on. */
export async function getContractText(ctx: Ctx, contractId: string): Promise<{ contract: LegalContract; text: string }> {
  const contract = await getContract(ctx, contractId);
  const row = await ctx.db.legalContract.findUniqueOrThrow({ where: { id: contract.id }, select: { text: true } });
  return { contract, text: row.text };
}

// ---- mappings and redlines (model work) ----

/** The contract of a model-work request, under an open matter; the caller may run model work. */
async function workSubject(ctx: Ctx, contractId: string): Promise<{ contract: LegalContract; matter: LegalMatter }> {
  assertMayRunModelWork(ctx);
  const contract = await getContract(ctx, contractId);
  const matter = await openMatter(ctx, contract.matterId);
  return { contract, matter };
}

async function queueDraft(ctx: Ctx, kind: LegalDraftKind, subject: { contract: LegalContract; matter: LegalMatter }, params: Prisma.InputJsonObject): Promise<LegalDraft> {
  const { contract, matter } = subject;
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    await lockOpenMatter(tx, matter);
    const id = newId(DRAFT_PREFIX[kind], now.getTime());
    const jobId = await enqueueWork(tx, ctx, { projectId: contract.projectId, kind: `legal.${kind}`, subjectId: id });
    const row = await tx.legalDraft.create({
      data: { id, projectId: contract.projectId, matterId: matter.id, contractId: contract.id, kind, status: 'queued', params, jobId, createdBy: ctx.caller.keyId, createdAt: now },
    });
    await recordAudit(tx, ctx, kind === 'mapping' ? 'legal_mapping.create' : 'legal_redline.create', {
      projectId: contract.projectId,
      targetId: id,
      data: { matter_id: matter.id, contract_id: contract.id, job_id: jobId },
    });
    return row;
  });
}

/**
 * Queues a mapping of the contract into the named fields (status `queued`; the worker asks the model as the calling
 * key, then checks each quote against the text). Needs inference:write too; 409 matter_closed under a closed matter.
 * Audits legal_mapping.create.
 */
export async function requestMapping(ctx: Ctx, contractId: string, raw: unknown): Promise<LegalDraft> {
  const input = parseInput(RequestMapping, raw ?? {});
  const seen = new Map<string, number>();
  input.fields.forEach((f, i) => {
    if (seen.has(f.name)) throw invalid(`fields[${i}].name`, `fields[${i}].name repeats the name of fields[${seen.get(f.name)}]: names must be unique.`);
    seen.set(f.name, i);
  });
  const subject = await workSubject(ctx, contractId);
  const fields = input.fields.map((f) => ({ name: f.name, ...(f.description !== undefined ? { description: f.description } : {}) }));
  return queueDraft(ctx, 'mapping', subject, { fields, ...(input.instructions !== undefined ? { instructions: input.instructions } : {}) });
}

/**
 * Queues a redline of the contract against a playbook and/or instructions (at least one). The worker asks the model
 * for edits, applies those whose passage it finds in the text, and keeps the unified diff. Needs inference:write
 * too; 409 matter_closed under a closed matter. Audits legal_redline.create.
 */
export async function requestRedline(ctx: Ctx, contractId: string, raw: unknown): Promise<LegalDraft> {
  const input = parseInput(RequestRedline, raw ?? {});
  if (input.playbook === undefined && input.instructions === undefined) {
    throw invalid('playbook', 'Give a playbook, instructions, or both: a redline needs something to measure the contract against.');
  }
  const subject = await workSubject(ctx, contractId);
  return queueDraft(ctx, 'redline', subject, {
    ...(input.playbook !== undefined ? { playbook: input.playbook } : {}),
    ...(input.instructions !== undefined ? { instructions: input.instructions } : {}),
  });
}

export async function listDrafts(ctx: Ctx, kind: LegalDraftKind, contractId: string, raw: unknown): Promise<Page<LegalDraft>> {
  const query = parseInput(ListQuery, raw);
  const contract = await getContract(ctx, contractId);
  const where: Prisma.LegalDraftWhereInput = { projectId: contract.projectId, contractId: contract.id, kind };
  return pageById(query, ctx.db.legalDraft, where);
}

export async function getDraft(ctx: Ctx, kind: LegalDraftKind, draftId: string): Promise<LegalDraft> {
  const row = await ctx.db.legalDraft.findFirst({ where: only(await readProject(ctx), { id: draftId, kind }) });
  if (!row) throw notFound(DRAFT_PARAM[kind], kind);
  addressed(ctx, row.projectId);
  return row;
}

// ---- how a draft reads (both surfaces) ----

/** A mapping's fields: every requested one, with its value and checked quote once completed (null before). */
export function mappingFields(d: LegalDraft): { fields: MappedField[]; flaggedQuotes: number | null } {
  const result = d.result as unknown as MappingResult | null;
  if (result) return { fields: result.fields, flaggedQuotes: result.flagged_quotes };
  const asked = ((d.params as { fields?: { name: string; description?: string }[] }).fields ?? []).map((f) => ({
    name: f.name,
    description: f.description ?? null,
    value: null,
    quote: null,
    found: null,
    quote_verified: null,
    quote_start: null,
  }));
  return { fields: asked, flaggedQuotes: null };
}

/** A redline's summary and edits once completed (null before). */
export function redlineResult(d: LegalDraft): RedlineResult | null {
  return (d.result as unknown as RedlineResult | null) ?? null;
}

export const draftParams = (d: LegalDraft) => d.params as { instructions?: string; playbook?: string };
