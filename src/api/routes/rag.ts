import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Prisma, RagDocument } from '../../generated/prisma/client.ts';
import { unixOrNull, unixSeconds } from '../../domain/context.ts';
import { ProjectIdParams } from '../../domain/projects/schema.ts';
import { DocumentIdParams, ListDocumentsQuery, RagQuery, SetRagSettings, UploadDocument, UploadFields } from '../../domain/rag/schema.ts';
import {
  createDocument,
  deleteDocument,
  getDocument,
  getRagSettings,
  listDocuments,
  queryChunks,
  setRagSettings,
  uploadDocumentJson,
  type RagChunkResult,
  type RagSettingsView,
} from '../../domain/rag/service.ts';
import { parseInput } from '../../domain/validation.ts';
import { invalid } from '../../errors/svc-error.ts';
import { Type } from 'typebox';
import { ListOf, sendList } from '../list.ts';
import { Bool, Int, Json, Num, NullableStr, ObjectType, Str, Unix, UnixOrNull } from '../response-fields.ts';
import { acceptUploads, readUpload, uploadRouteOptions } from './uploads.ts';

/** CONTRACT §13's document object. */
export function presentDocument(d: RagDocument) {
  return {
    id: d.id,
    object: 'svc.rag_document' as const,
    project_id: d.projectId,
    name: d.name,
    bytes: d.bytes,
    content_type: d.contentType,
    chunks: d.chunks,
    status: d.status as 'processing' | 'ready' | 'failed',
    error: d.error,
    metadata: d.metadata,
    created_at: unixSeconds(d.createdAt),
  };
}

/** CONTRACT §13's chunk object, best first in the list envelope. */
export function presentChunk(c: RagChunkResult) {
  return { object: 'svc.rag_chunk' as const, document_id: c.documentId, chunk_id: c.chunkId, text: c.text, score: c.score, metadata: c.metadata };
}

export function presentRagSettings(s: RagSettingsView) {
  return { object: 'svc.rag_settings' as const, project_id: s.projectId, embedding_model: s.embeddingModel, updated_at: unixOrNull(s.updatedAt) };
}

const documentFields = {
  id: Str('The document id (doc_…).'),
  object: ObjectType('svc.rag_document'),
  project_id: Str('The project it belongs to.'),
  name: Str('Its name.'),
  bytes: Int('Its size as uploaded, in bytes.'),
  content_type: Str('text/plain, text/markdown, text/html or application/pdf.'),
  chunks: Int('How many chunks it was split into (0 until indexed).'),
  status: Str('processing, ready or failed.'),
  error: NullableStr("Why indexing failed, or null."),
  metadata: Json('The metadata given at upload (a JSON object).'),
  created_at: Unix('Uploaded'),
};
const RagDocumentBody = Type.Object(documentFields, { description: "CONTRACT §13's document object." });
const DeletedRagDocument = Type.Object(
  { ...documentFields, deleted: Bool('Always true: the document and its chunks are gone.') },
  { description: 'The deleted document.' },
);

const RagChunk = Type.Object(
  {
    object: ObjectType('svc.rag_chunk'),
    document_id: Str('The document it comes from.'),
    chunk_id: Str('The chunk id.'),
    text: Str("The chunk's text."),
    score: Num('Relevance to the query: higher is better.'),
    metadata: Json("The document's metadata."),
  },
  { description: "CONTRACT §13's chunk object." },
);

const RagSettings = Type.Object(
  {
    object: ObjectType('svc.rag_settings'),
    project_id: Str('The project.'),
    embedding_model: NullableStr('The embedding model (of type embedding) the project indexes with, or null: keyword search only.'),
    updated_at: UnixOrNull('Last changed'),
  },
  { description: "The project's RAG settings." },
);

const documentUpload = uploadRouteOptions(UploadDocument, {
  name: { type: 'string', description: 'Default: the file name.' },
  project_id: { type: 'string' },
  metadata: { type: 'string', description: 'A JSON object.' },
});

function metadataOf(raw: string | undefined): Prisma.InputJsonObject {
  if (raw === undefined || raw === '') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw invalid('metadata', 'metadata must be a JSON object in a string.');
  }
  // The JSON route's rule for metadata, applied to the parsed value.
  parseInput(UploadDocument, { name: 'x', content: '', metadata: parsed });
  return (parsed ?? {}) as Prisma.InputJsonObject;
}

export const ragRoutes: FastifyPluginAsyncTypebox = async (app) => {
  // Scoped to this plugin: only the upload route reads multipart bodies.
  await acceptUploads(app);

  app.post('/v1/rag/documents',
    { ...documentUpload, config: { ...documentUpload.config, action: 'rag_document.create' }, schema: { ...documentUpload.schema, response: { 200: RagDocumentBody } } },
    async (req, reply) => {
      if (!req.isMultipart()) return presentDocument(await uploadDocumentJson(app.ports.rag, req.ctx, req.body));
      const upload = await readUpload(req, reply, UploadFields);
      if (!upload) return reply; // an Idempotency-Key's first answer, replayed
      const { file, contentType, fields } = upload;
      return presentDocument(
        await createDocument(app.ports.rag, req.ctx, {
          projectId: fields.project_id,
          name: fields.name ?? (file.filename || 'document'),
          contentType,
          data: file.data,
          bytes: file.bytes,
          metadata: metadataOf(fields.metadata),
          param: 'file',
        }),
      );
    },
  );

  app.get('/v1/rag/documents', { config: { action: 'rag_document.list' }, schema: { querystring: ListDocumentsQuery, response: { 200: ListOf(RagDocumentBody) } } }, async (req, reply) =>
    sendList(reply, await listDocuments(req.ctx, req.query), '/v1/rag/documents', presentDocument),
  );

  app.get('/v1/rag/documents/:document_id', { config: { action: 'rag_document.read' }, schema: { params: DocumentIdParams, response: { 200: RagDocumentBody } } }, async (req) =>
    presentDocument(await getDocument(req.ctx, req.params.document_id)),
  );

  app.delete('/v1/rag/documents/:document_id', { config: { action: 'rag_document.delete' }, schema: { params: DocumentIdParams, response: { 200: DeletedRagDocument } } }, async (req) => ({
    ...presentDocument(await deleteDocument(req.ctx, req.params.document_id)),
    deleted: true,
  }));

  app.post('/v1/rag/query', { config: { action: 'rag.query' }, schema: { body: RagQuery, response: { 200: ListOf(RagChunk) } } }, async (req, reply) => {
    const chunks = await queryChunks(app.ports.rag, req.ctx, req.body);
    return sendList(reply, { data: chunks, hasMore: false, limit: chunks.length }, '/v1/rag/query', presentChunk);
  });

  app.put('/v1/projects/:project_id/rag', { config: { action: 'rag_settings.update' }, schema: { params: ProjectIdParams, body: SetRagSettings, response: { 200: RagSettings } } }, async (req) =>
    presentRagSettings(await setRagSettings(app.ports.rag, req.ctx, req.params.project_id, req.body)),
  );

  app.get('/v1/projects/:project_id/rag', { config: { action: 'rag_settings.read' }, schema: { params: ProjectIdParams, response: { 200: RagSettings } } }, async (req) =>
    presentRagSettings(await getRagSettings(req.ctx, req.params.project_id)),
  );
};
