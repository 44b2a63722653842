import type { RagDocument } from '../generated/prisma/client.ts';
import {
  deleteDocument,
  getDocument,
  getRagSettings,
  listDocuments,
  queryChunks,
  setRagSettings,
  uploadDocumentJson,
  type RagChunkResult,
  type RagSettingsView,
} from '../domain/rag/service.ts';
import { builder } from './builder.ts';
import { serviceConnection } from './connections.ts';

/** REST's svc.rag_document (CONTRACT §13) with camelCase names. */
const RagDocumentRef = builder.objectRef<RagDocument>('RagDocument').implement({
  description: 'A document uploaded for retrieval; chunked and indexed in the background.',
  fields: (t) => ({
    id: t.exposeID('id'),
    projectId: t.exposeID('projectId'),
    name: t.exposeString('name'),
    bytes: t.exposeInt('bytes', { description: 'Size of the upload.' }),
    contentType: t.exposeString('contentType', { description: 'text/plain, text/markdown, text/html or application/pdf.' }),
    chunks: t.exposeInt('chunks'),
    status: t.exposeString('status', { description: 'processing, ready or failed.' }),
    error: t.exposeString('error', { nullable: true, description: 'Why indexing failed: "<code>: <message>".' }),
    metadata: t.field({ type: 'JSON', resolve: (d) => d.metadata }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
  }),
});

/** REST's svc.rag_chunk. */
const RagChunkRef = builder.objectRef<RagChunkResult>('RagChunk').implement({
  description: 'A chunk a query found, best first.',
  fields: (t) => ({
    documentId: t.exposeID('documentId'),
    chunkId: t.exposeID('chunkId'),
    text: t.exposeString('text'),
    score: t.exposeFloat('score', { description: 'keyword: ts_rank (+1 for a full match); vector: cosine; hybrid: reciprocal rank fusion.' }),
    metadata: t.field({ type: 'JSON', description: "The document's metadata.", resolve: (c) => c.metadata }),
  }),
});

const RagSettingsRef = builder.objectRef<RagSettingsView>('RagSettings').implement({
  fields: (t) => ({
    projectId: t.exposeID('projectId'),
    embeddingModel: t.exposeString('embeddingModel', { nullable: true, description: 'null: keyword search only.' }),
    updatedAt: t.expose('updatedAt', { type: 'UnixSeconds', nullable: true }),
  }),
});

builder.queryFields((t) => ({
  ragDocuments: t.connection(
    {
      type: RagDocumentRef,
      nullable: true,
      authScopes: { action: 'rag_document.list' },
      description: 'Newest first; status filters (processing, ready, failed).',
      args: { projectId: t.arg.id(), status: t.arg.string() },
      resolve: (_root, args, { ctx }) =>
        serviceConnection(args, (query) => listDocuments(ctx, { ...query, project_id: args.projectId ?? undefined, status: args.status ?? undefined })),
    },
    { name: 'RagDocumentConnection' },
    { name: 'RagDocumentEdge' },
  ),
  ragDocument: t.field({
    type: RagDocumentRef,
    nullable: true,
    authScopes: { action: 'rag_document.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getDocument(ctx, String(args.id)),
  }),
  ragQuery: t.field({
    type: [RagChunkRef],
    nullable: true,
    authScopes: { action: 'rag.query' },
    description: 'Keyword search always; vector and hybrid need the project\'s embedding model (mode default: hybrid with one, else keyword).',
    args: {
      projectId: t.arg.id(),
      query: t.arg.string({ required: true }),
      topK: t.arg.int(),
      documentIds: t.arg.idList(),
      mode: t.arg.string({ description: 'hybrid, keyword or vector.' }),
    },
    resolve: (_root, args, { ctx, ports }) =>
      queryChunks(ports.rag, ctx, {
        ...(args.projectId != null ? { project_id: String(args.projectId) } : {}),
        query: args.query,
        ...(args.topK != null ? { top_k: args.topK } : {}),
        ...(args.documentIds != null ? { document_ids: args.documentIds.map(String) } : {}),
        ...(args.mode != null ? { mode: args.mode } : {}),
      }),
  }),
  ragSettings: t.field({
    type: RagSettingsRef,
    nullable: true,
    authScopes: { action: 'rag_settings.read' },
    args: { projectId: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getRagSettings(ctx, String(args.projectId)),
  }),
}));

builder.mutationFields((t) => ({
  uploadDocument: t.field({
    type: RagDocumentRef,
    nullable: true,
    authScopes: { action: 'rag_document.create' },
    description: 'The content as a string (files: REST multipart). Over the plan\'s limit: document_too_large (param content).',
    args: {
      projectId: t.arg.id(),
      name: t.arg.string({ required: true }),
      content: t.arg.string({ required: true }),
      contentType: t.arg.string({ description: 'text/plain (default), text/markdown or text/html.' }),
      metadata: t.arg({ type: 'JSON' }),
    },
    resolve: (_root, args, { ctx, ports }) =>
      uploadDocumentJson(ports.rag, ctx, {
        ...(args.projectId != null ? { project_id: String(args.projectId) } : {}),
        name: args.name,
        content: args.content,
        ...(args.contentType != null ? { content_type: args.contentType } : {}),
        ...(args.metadata != null ? { metadata: args.metadata } : {}),
      }),
  }),
  deleteDocument: t.field({
    type: RagDocumentRef,
    nullable: true,
    authScopes: { action: 'rag_document.delete' },
    description: 'Deletes the document and its chunks at once; returns the document as it was.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => deleteDocument(ctx, String(args.id)),
  }),
  setRagSettings: t.field({
    type: RagSettingsRef,
    nullable: true,
    authScopes: { action: 'rag_settings.update' },
    description: 'The embedding model (of type embedding), or null. A new model re-embeds the ready documents.',
    args: { projectId: t.arg.id({ required: true }), embeddingModel: t.arg.string() },
    resolve: (_root, args, { ctx, ports }) =>
      setRagSettings(ports.rag, ctx, String(args.projectId), 'embeddingModel' in args ? { embedding_model: args.embeddingModel } : {}),
  }),
}));
