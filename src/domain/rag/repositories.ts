import type { Db, Tx } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';
import type { RagPorts } from './ports.ts';
import type { RagChunkResult } from './service.ts';
import * as store from './store.ts';

/**
 * A Dev repository's files as RAG documents (CONTRACT §16: the Dev index reuses RAG's chunking, indexing and search).
 * Each file is one document with `repository_id` set, indexed by the same background worker (jobs/rag-indexing) as
 * any upload: chunked, embedded with the project's embedding model through the inference pipeline as the key that
 * posted it, and full-text indexed. These documents belong to the repository: they are not in /v1/rag/documents, and
 * the project's RAG queries (POST /v1/rag/query, the inference `rag` option) do not search them; the repository's Q&A,
 * reviews and tests do (searchRepository, keywordChunks).
 */

export interface RepositoryDocument {
  path: string;
  text: string;
  bytes: number;
}

/**
 * Queues files of a repository for indexing (status processing), their text sealed until indexed, in one statement;
 * `createdBy` is the key that posted them: its limits and budget pay for the embeddings. Returns the document ids in
 * the files' order.
 */
export async function addRepositoryDocuments(
  ports: RagPorts,
  tx: Tx,
  at: { projectId: string; repositoryId: string; createdBy: string; now: Date },
  files: RepositoryDocument[],
): Promise<string[]> {
  const ids = files.map(() => newId('doc', at.now.getTime()));
  await tx.ragDocument.createMany({
    data: files.map((f, i) => ({
      id: ids[i]!,
      projectId: at.projectId,
      repositoryId: at.repositoryId,
      name: f.path,
      bytes: f.bytes,
      contentType: 'text/plain',
      metadata: { repository_id: at.repositoryId, path: f.path },
      contentSealed: ports.sealer.seal(f.text, ids[i]!),
      createdBy: at.createdBy,
      createdAt: at.now,
      nextAttemptAt: at.now,
    })),
  });
  return ids;
}

/** Deletes documents of a repository and their chunks at once (a file replaced or removed); the index version moves. */
export async function dropRepositoryDocuments(tx: Tx, projectId: string, repositoryId: string, documentIds: string[]): Promise<void> {
  if (documentIds.length === 0) return;
  await tx.ragChunk.deleteMany({ where: { projectId, documentId: { in: documentIds } } });
  await tx.ragDocument.deleteMany({ where: { projectId, repositoryId, id: { in: documentIds } } });
  await store.bumpVersion(tx, projectId);
}

export interface IndexState {
  processing: number;
  ready: number;
  failed: number;
  /** The first failed file's error ("<path>: <code>: <message>"), null when none failed. */
  error: string | null;
}

const EMPTY: IndexState = { processing: 0, ready: 0, failed: 0, error: null };

/** How far each repository's files are indexed: one grouped read for all of them (a list page), plus one per failure. */
export async function indexStates(db: Db | Tx, projectId: string, repositoryIds: string[]): Promise<Map<string, IndexState>> {
  const out = new Map<string, IndexState>(repositoryIds.map((id) => [id, { ...EMPTY }]));
  if (repositoryIds.length === 0) return out;
  const groups = await db.ragDocument.groupBy({
    by: ['repositoryId', 'status'],
    where: { projectId, repositoryId: { in: repositoryIds } },
    _count: { _all: true },
  });
  for (const g of groups) {
    const state = out.get(g.repositoryId!);
    if (state && (g.status === 'processing' || g.status === 'ready' || g.status === 'failed')) state[g.status] = g._count._all;
  }
  for (const [id, state] of out) {
    if (state.failed === 0) continue;
    const first = await db.ragDocument.findFirst({ where: { projectId, repositoryId: id, status: 'failed' }, orderBy: { id: 'asc' }, select: { name: true, error: true } });
    state.error = first ? `${first.name}: ${first.error ?? 'indexing failed'}` : null;
  }
  return out;
}

/** Each document's indexing state, for a page of files. */
export async function documentStates(db: Db | Tx, projectId: string, documentIds: string[]) {
  const rows = await db.ragDocument.findMany({ where: { projectId, id: { in: documentIds } }, select: { id: true, status: true, chunks: true, error: true } });
  return new Map(rows.map((r) => [r.id, r]));
}

/**
 * Keyword search over one repository's files, without embeddings (the background work reads its context this way: it
 * has the database, not the caller's inference pipeline). `excludeDocumentIds`: files the prompt already carries whole.
 */
export async function keywordChunks(
  db: Db | Tx,
  projectId: string,
  repositoryId: string,
  query: string,
  limit: number,
  excludeDocumentIds: string[] = [],
): Promise<RagChunkResult[]> {
  if (!/\w/.test(query)) return [];
  const hits = (await store.keywordSearch(db, projectId, query, null, limit + 20, repositoryId)).filter((h) => !excludeDocumentIds.includes(h.documentId)).slice(0, limit);
  const rows = new Map((await store.chunksByIds(db, projectId, hits.map((h) => h.chunkId))).map((r) => [r.id, r]));
  return hits.flatMap((h) => {
    const row = rows.get(h.chunkId);
    return row ? [{ documentId: row.documentId, documentName: row.documentName, chunkId: row.id, text: row.text, score: h.score, metadata: row.metadata }] : [];
  });
}
