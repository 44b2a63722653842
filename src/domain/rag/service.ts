import type { Prisma, RagDocument } from '../../generated/prisma/client.ts';
import { newId } from '../../db/ids.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import { recordAudit } from '../audit/service.ts';
import { addressed, requireProjectId, visibleProjectId, type Ctx } from '../context.ts';
import { routeAllowed } from '../auth/actions.ts';
import { pageById, type Page } from '../pagination.ts';
import { parseInput } from '../validation.ts';
import { extractDocumentText } from './extract.ts';
import { documentLimitOf, showBytes } from './limits.ts';
import type { RagPorts } from './ports.ts';
import {
  DEFAULT_TOP_K,
  ListDocumentsQuery,
  RagQuery,
  SetRagSettings,
  UploadDocument,
  type ContentType,
  type QueryMode,
} from './schema.ts';
import * as store from './store.ts';
import { fuse, topK, VectorCache, type Scored } from './vectors.ts';

const notFound = () => new SvcError('not_found', { param: 'document_id', message: 'No such document.' });

/** One upload, from JSON or from a multipart form (the adapter read the file). */
export interface Upload {
  projectId: string | null | undefined;
  name: string;
  contentType: ContentType;
  /** The content as sent: a string (JSON) or the file's bytes. */
  data: string | Uint8Array;
  /** Bytes of the upload: the file's, or the content's UTF-8. */
  bytes: number;
  metadata: Prisma.InputJsonObject;
  /** The field a size or content error names: `content` (JSON) or `file` (multipart). */
  param: 'content' | 'file';
}

/** POST /v1/rag/documents as JSON, GraphQL uploadDocument. */
export function uploadDocumentJson(ports: RagPorts, ctx: Ctx, raw: unknown): Promise<RagDocument> {
  const input = parseInput(UploadDocument, raw);
  return createDocument(ports, ctx, {
    projectId: input.project_id,
    name: input.name,
    contentType: input.content_type ?? 'text/plain',
    data: input.content,
    bytes: Buffer.byteLength(input.content, 'utf8'),
    metadata: (input.metadata ?? {}) as Prisma.InputJsonObject,
    param: 'content',
  });
}

/**
 * Checks the plan's size limit (413 document_too_large), extracts the text, and stores the document `processing` with
 * its text sealed; the background worker chunks and indexes it (jobs/rag-indexing). Audits rag_document.create. The
 * content is never logged.
 */
export async function createDocument(ports: RagPorts, ctx: Ctx, up: Upload): Promise<RagDocument> {
  const projectId = await requireProjectId(ctx, up.projectId ?? ctx.caller.projectId);
  const project = await ctx.db.project.findUnique({ where: { id: projectId }, select: { plan: true } });
  if (!project) throw new SvcError('not_found', { param: 'project_id', message: 'No such project.' });
  const limit = documentLimitOf(project.plan);
  if (up.bytes > limit) {
    throw new SvcError('document_too_large', {
      param: up.param,
      message: `The document is ${up.bytes} bytes; the ${project.plan} plan accepts documents of up to ${showBytes(limit)} (${limit} bytes).`,
    });
  }
  await assertEmbeddingAllowed(ports, ctx, projectId);
  const text = await extractDocumentText(up.contentType, up.data, up.param, { maxTextBytes: limit });
  if (!/\S/.test(text)) throw invalid(up.param, 'The document has no text to index.');
  const now = ctx.now();
  const id = newId('doc', now.getTime());
  return ctx.db.$transaction(async (tx) => {
    const doc = await tx.ragDocument.create({
      data: {
        id,
        projectId,
        name: up.name,
        bytes: up.bytes,
        contentType: up.contentType,
        metadata: up.metadata,
        contentSealed: ports.sealer.seal(text, id),
        createdBy: ctx.caller.keyId,
        createdAt: now,
        nextAttemptAt: now,
      },
    });
    await recordAudit(tx, ctx, 'rag_document.create', { projectId, targetId: id, data: { name: up.name, bytes: up.bytes, content_type: up.contentType } });
    return doc;
  });
}

/**
 * CONTRACT §22: a document is embedded with the project's embedding model as the key that uploads it; a key whose
 * model list leaves that model out is refused at upload (403 insufficient_scope, param model), as on /v1/embeddings
 * (a search that embeds its query is refused there, by the embeddings service).
 */
async function assertEmbeddingAllowed(ports: RagPorts, ctx: Ctx, projectId: string): Promise<void> {
  if (!ctx.caller.models) return;
  const model = (await store.settingsOf(ctx.db, projectId)).embeddingModel;
  if (model === null || ports.routesForModel(model).some((r) => routeAllowed(ctx.caller.models, r))) return;
  throw new SvcError('insufficient_scope', {
    param: 'model',
    message: `This key may not use model ${JSON.stringify(model.slice(0, 200))} (it is outside the key's models), and the project embeds its documents with it.`,
  });
}

/** Newest first; a key sees its own project's, the operator every project's (or the one it names). */
export async function listDocuments(ctx: Ctx, input: unknown): Promise<Page<RagDocument>> {
  const query = parseInput(ListDocumentsQuery, input);
  const projectId = await visibleProjectId(ctx, query.project_id);
  const where: Prisma.RagDocumentWhereInput = {
    repositoryId: null,
    ...(projectId !== undefined ? { projectId } : {}),
    ...(query.status !== undefined ? { status: query.status } : {}),
  };
  return pageById(query, ctx.db.ragDocument, where);
}

/** Another project's document looks absent (404). */
export async function getDocument(ctx: Ctx, documentId: string): Promise<RagDocument> {
  const projectId = await visibleProjectId(ctx, null);
  const found = await store.findDocument(ctx.db, documentId, projectId);
  if (!found) throw notFound();
  addressed(ctx, found.projectId);
  return found;
}

/**
 * Deletes the document and its chunks in one transaction: from the answer on, no query finds them (the version
 * moves, so every replica's vector matrix reloads). Audits rag_document.delete. Returns the document as it was.
 */
export async function deleteDocument(ctx: Ctx, documentId: string): Promise<RagDocument> {
  const doc = await getDocument(ctx, documentId);
  await ctx.db.$transaction(async (tx) => {
    await tx.ragChunk.deleteMany({ where: { documentId: doc.id } });
    await tx.ragDocument.delete({ where: { id: doc.id } });
    await store.bumpVersion(tx, doc.projectId);
    await recordAudit(tx, ctx, 'rag_document.delete', { projectId: doc.projectId, targetId: doc.id, data: { name: doc.name } });
  });
  return doc;
}

export interface RagSettingsView {
  projectId: string;
  embeddingModel: string | null;
  updatedAt: Date | null;
}

export async function getRagSettings(ctx: Ctx, projectId: string): Promise<RagSettingsView> {
  const id = await requireProjectId(ctx, projectId);
  const s = await store.settingsOf(ctx.db, id);
  return { projectId: id, embeddingModel: s.embeddingModel, updatedAt: s.updatedAt };
}

/**
 * Sets the project's embedding model (a model of type embedding) or null. A new model re-embeds the project's ready
 * documents in the background (they show `processing` until done). Audits rag_settings.update.
 */
export async function setRagSettings(ports: RagPorts, ctx: Ctx, projectId: string, raw: unknown): Promise<RagSettingsView> {
  const { embedding_model: model } = parseInput(SetRagSettings, raw);
  if (model !== null) {
    const type = ports.modelType(model);
    if (type === undefined) throw invalid('embedding_model', `Unknown model "${model.slice(0, 200)}". GET /v1/models lists the models.`);
    if (type !== 'embedding') throw invalid('embedding_model', `${model.slice(0, 200)} is a chat model: the embedding model must be of type embedding.`);
  }
  const id = await requireProjectId(ctx, projectId);
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const project = await tx.project.findUnique({ where: { id }, select: { id: true } });
    if (!project) throw new SvcError('not_found', { param: 'project_id', message: 'No such project.' });
    const before = await store.settingsOf(tx, id);
    await tx.ragSettings.upsert({
      where: { projectId: id },
      create: { projectId: id, embeddingModel: model, version: 1, updatedAt: now },
      update: { embeddingModel: model, version: { increment: 1 }, updatedAt: now },
    });
    if (model !== null && model !== before.embeddingModel) {
      await tx.ragDocument.updateMany({ where: { projectId: id, status: 'ready' }, data: { status: 'processing', nextAttemptAt: now, leaseUntil: null } });
    }
    await recordAudit(tx, ctx, 'rag_settings.update', { projectId: id, targetId: id, data: { embedding_model: model, previous: before.embeddingModel } });
    return { projectId: id, embeddingModel: model, updatedAt: now };
  });
}

export interface RagChunkResult {
  documentId: string;
  documentName: string;
  chunkId: string;
  text: string;
  score: number;
  metadata: Prisma.JsonValue;
}

const vectorCache = new VectorCache();

/** Candidates each list brings to hybrid fusion, per chunk asked for. */
const FUSION_DEPTH = 4;

interface Search {
  projectId: string;
  query: string;
  topK: number;
  documentIds: string[] | null;
  mode: QueryMode | undefined;
  /** The field a missing embedding model is blamed on. */
  modeParam: string;
  /** Prefix of the other fields' names in errors: '' (the query) or 'rag.' (the inference option). */
  prefix: string;
  /** The project's own documents (null), or one Dev repository's files (domain/rag/repositories.ts). */
  repositoryId: string | null;
}

async function search(ports: RagPorts, ctx: Ctx, s: Search): Promise<RagChunkResult[]> {
  const settings = await store.settingsOf(ctx.db, s.projectId);
  const mode: QueryMode = s.mode ?? (settings.embeddingModel ? 'hybrid' : 'keyword');
  if (mode !== 'keyword' && !settings.embeddingModel) {
    throw invalid(s.modeParam, `mode "${mode}" needs an embedding model: set one with PUT /v1/projects/${s.projectId}/rag {embedding_model}, or use mode "keyword".`);
  }
  let documents: Set<string> | null = null;
  if (s.documentIds) {
    const found = await store.existingDocuments(ctx.db, s.projectId, s.documentIds);
    const missing = s.documentIds.find((id) => !found.has(id));
    if (missing !== undefined) throw new SvcError('not_found', { param: `${s.prefix}document_ids`, message: `No such document: ${missing.slice(0, 200)}.` });
    documents = found;
  }
  const depth = mode === 'hybrid' ? Math.max(s.topK * FUSION_DEPTH, 20) : s.topK;
  // Hybrid runs its halves at once: the keyword search waits on the database while the vector half embeds the query
  // and scores it in process.
  const keywordHalf = mode === 'vector' ? Promise.resolve([]) : store.keywordSearch(ctx.db, s.projectId, s.query, s.documentIds, depth, s.repositoryId);
  const vectorHalf = mode === 'keyword' ? Promise.resolve([]) : nearestChunks(ports, ctx, s, settings, depth, documents);
  const [keywordDone, vectorDone] = await Promise.allSettled([keywordHalf, vectorHalf]);
  if (vectorDone.status === 'rejected') throw vectorDone.reason; // the caller's own refusal (429, budget) first
  if (keywordDone.status === 'rejected') throw keywordDone.reason;
  const keyword = keywordDone.value;
  const nearest = vectorDone.value;
  let ranked: Scored[] = mode === 'keyword' ? keyword : mode === 'vector' ? nearest : fuse([keyword, nearest], s.topK);
  ranked = ranked.slice(0, s.topK);
  const rows = new Map((await store.chunksByIds(ctx.db, s.projectId, ranked.map((r) => r.chunkId))).map((r) => [r.id, r]));
  // A chunk deleted between the ranking and this read is left out.
  return ranked.flatMap((r) => {
    const row = rows.get(r.chunkId);
    return row ? [{ documentId: row.documentId, documentName: row.documentName, chunkId: row.id, text: row.text, score: r.score, metadata: row.metadata }] : [];
  });
}

/** The vector half: the query's embedding (charged through the inference pipeline) scored against the project's matrix. */
async function nearestChunks(
  ports: RagPorts,
  ctx: Ctx,
  s: Search,
  settings: { embeddingModel: string | null; version: number },
  depth: number,
  documents: Set<string> | null,
): Promise<Scored[]> {
  const [vector] = await ports.embed(ctx, s.projectId, settings.embeddingModel!, [s.query]);
  // A repository's vectors are a matrix of their own; the project's version moves for both.
  const cacheKey = s.repositoryId === null ? s.projectId : `${s.projectId}/${s.repositoryId}`;
  const matrix = await vectorCache.get(cacheKey, settings.version, () => store.loadVectors(ctx.db, s.projectId, s.repositoryId));
  return topK(matrix, vector!, depth, documents);
}

/**
 * POST /v1/rag/query, GraphQL ragQuery (CONTRACT §13). Keyword search always works; vector and hybrid need the
 * project's embedding model (else 400 param mode) and embed the query through the inference pipeline (charged to
 * the caller). Best first.
 */
export async function queryChunks(ports: RagPorts, ctx: Ctx, raw: unknown): Promise<RagChunkResult[]> {
  const input = parseInput(RagQuery, raw);
  const projectId = await requireProjectId(ctx, input.project_id ?? ctx.caller.projectId);
  return search(ports, ctx, {
    projectId,
    query: input.query,
    topK: input.top_k ?? DEFAULT_TOP_K,
    documentIds: input.document_ids ?? null,
    mode: input.mode,
    modeParam: 'mode',
    prefix: '',
    repositoryId: null,
  });
}

/** For the inference option (stage.ts): the project's default mode, errors naming `rag.*`. */
export function searchForInference(
  ports: RagPorts,
  ctx: Ctx,
  projectId: string,
  query: string,
  topK: number | undefined,
  documentIds: string[] | undefined,
): Promise<RagChunkResult[]> {
  return search(ports, ctx, { projectId, query, topK: topK ?? DEFAULT_TOP_K, documentIds: documentIds ?? null, mode: undefined, modeParam: 'rag', prefix: 'rag.', repositoryId: null });
}

/**
 * One Dev repository's files (domain/rag/repositories.ts), in the project's default mode (hybrid with an embedding
 * model, the query embedded through the inference pipeline as the caller; else keyword). Best first.
 */
export function searchRepository(ports: RagPorts, ctx: Ctx, projectId: string, repositoryId: string, query: string, topK: number): Promise<RagChunkResult[]> {
  return search(ports, ctx, { projectId, query, topK, documentIds: null, mode: undefined, modeParam: 'mode', prefix: '', repositoryId });
}
