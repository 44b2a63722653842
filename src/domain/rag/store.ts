import { Prisma, type RagDocument } from '../../generated/prisma/client.ts';
import type { Db, Tx } from '../../db/client.ts';
import { claimLeases, holdsLease as holdsLeaseOn, releaseLease } from '../../db/leases.ts';
import type { StoredVector } from './vectors.ts';

/** The RAG queries; projectId is in every where that a caller's input reaches. */

/** The text search configuration of the tsvector column and of every query (both must agree). */
const TS_CONFIG = 'english';

/** The project's own documents: a Dev repository's files (repository_id set) are not among them. */
export function findDocument(db: Db | Tx, documentId: string, projectId: string | undefined): Promise<RagDocument | null> {
  return db.ragDocument.findFirst({ where: { id: documentId, repositoryId: null, ...(projectId !== undefined ? { projectId } : {}) } });
}

/**
 * Which chunks a search reads: the project's own documents (null), or one Dev repository's files. Chunks carry their
 * document's repository_id, so the filter needs no join.
 */
const inScope = (repositoryId: string | null) => (repositoryId === null ? Prisma.sql`AND c.repository_id IS NULL` : Prisma.sql`AND c.repository_id = ${repositoryId}`);

/** The project's embedding model and index version (0 and null before anything was set). */
export async function settingsOf(db: Db | Tx, projectId: string): Promise<{ embeddingModel: string | null; version: number; updatedAt: Date | null }> {
  const row = await db.ragSettings.findUnique({ where: { projectId } });
  return { embeddingModel: row?.embeddingModel ?? null, version: row?.version ?? 0, updatedAt: row?.updatedAt ?? null };
}

/** Every change to a project's chunks moves its version: the in-process vector matrices reload on every replica. */
export async function bumpVersion(tx: Tx | Db, projectId: string): Promise<void> {
  await tx.ragSettings.upsert({ where: { projectId }, create: { projectId, version: 1 }, update: { version: { increment: 1 } } });
}

export interface NewChunk {
  id: string;
  ordinal: number;
  text: string;
  embedding: Uint8Array | null;
}

/** In statements of at most 500 rows; the tsvector is computed by the database from the same text; repository_id is the document's. */
export async function insertChunks(tx: Tx, documentId: string, projectId: string, chunks: NewChunk[]): Promise<void> {
  for (let i = 0; i < chunks.length; i += 500) {
    const rows = chunks.slice(i, i + 500).map(
      (c) =>
        Prisma.sql`(${c.id}, ${c.ordinal}::int, ${c.text}, ${c.embedding}::bytea, ${c.embedding ? c.embedding.byteLength / 4 : null}::int)`,
    );
    await tx.$executeRaw`
      INSERT INTO rag_chunks (id, document_id, project_id, ordinal, text, tsv, embedding, dims, repository_id)
      SELECT v.id, ${documentId}, ${projectId}, v.ordinal, v.text, to_tsvector(${TS_CONFIG}::regconfig, v.text), v.embedding, v.dims,
        (SELECT d.repository_id FROM rag_documents d WHERE d.id = ${documentId})
      FROM (VALUES ${Prisma.join(rows)}) AS v(id, ordinal, text, embedding, dims)`;
  }
}

export function chunkTextsOf(db: Db | Tx, documentId: string): Promise<{ id: string; text: string }[]> {
  return db.ragChunk.findMany({ where: { documentId }, select: { id: true, text: true }, orderBy: { ordinal: 'asc' } });
}

export async function setEmbeddings(tx: Tx, rows: { id: string; embedding: Uint8Array }[]): Promise<void> {
  for (const r of rows) {
    await tx.$executeRaw`UPDATE rag_chunks SET embedding = ${r.embedding}::bytea, dims = ${r.embedding.byteLength / 4}::int WHERE id = ${r.id}`;
  }
}

export interface KeywordHit {
  chunkId: string;
  documentId: string;
  score: number;
}

/**
 * Full text search over the GIN-indexed tsvector, in two steps. First the chunks that match the whole query as a
 * search box reads it (websearch_to_tsquery: every word, "quoted phrases", -exclusions, OR), ranked by ts_rank + 1.
 * When those are fewer than `limit`, the chunks with any of the query's words (stemmed, stop words dropped: a question
 * asked in a sentence still finds the chunks that answer it) fill the rest, ranked by ts_rank over those words (below
 * 1). The second, wider search runs only when needed. Only the project's chunks, only the named documents when given.
 *
 * Each step ranks at most RANKED_CANDIDATES of its matches. Ranking reads every candidate's tsvector (about 12 µs a
 * chunk on PostgreSQL 15 here): a query of common words matching 33,000 of 110,000 chunks took 428 ms ranked whole and
 * 36 ms with the bound (most of it the index scan). The price: on a large corpus a query of common words ranks the
 * first matches the index yields, not all of them; a query whose matches are fewer is ranked exactly.
 */
const RANKED_CANDIDATES = 1_000;

export async function keywordSearch(
  db: Db | Tx,
  projectId: string,
  query: string,
  documentIds: string[] | null,
  limit: number,
  repositoryId: string | null = null,
): Promise<KeywordHit[]> {
  const docs = Prisma.sql`${documentIds ? Prisma.sql`AND c.document_id = ANY(${documentIds}::text[])` : Prisma.empty} ${inScope(repositoryId)}`;
  const whole = await db.$queryRaw<KeywordHit[]>`
    SELECT c.id AS "chunkId", c.document_id AS "documentId", (ts_rank(c.tsv, c.q) + 1)::float8 AS score
    FROM (
      SELECT c.id, c.document_id, c.tsv, q FROM rag_chunks c, websearch_to_tsquery(${TS_CONFIG}::regconfig, ${query}) q
      WHERE c.project_id = ${projectId} AND c.tsv @@ q ${docs}
      LIMIT ${RANKED_CANDIDATES}
    ) c
    ORDER BY score DESC, c.id
    LIMIT ${limit}`;
  if (whole.length >= limit) return whole;
  const any = await db.$queryRaw<KeywordHit[]>`
    WITH q AS (
      SELECT websearch_to_tsquery(${TS_CONFIG}::regconfig, ${query}) AS whole,
        to_tsquery('simple', array_to_string(ARRAY(
          SELECT quote_literal(l) FROM unnest(tsvector_to_array(to_tsvector(${TS_CONFIG}::regconfig, ${query}))) AS l
        ), ' | ')) AS words
    )
    SELECT c.id AS "chunkId", c.document_id AS "documentId", ts_rank(c.tsv, q.words)::float8 AS score
    FROM (
      SELECT c.id, c.document_id, c.tsv FROM rag_chunks c, q
      WHERE c.project_id = ${projectId} AND c.tsv @@ q.words AND NOT (c.tsv @@ q.whole) ${docs}
      LIMIT ${RANKED_CANDIDATES}
    ) c, q
    ORDER BY score DESC, c.id
    LIMIT ${limit - whole.length}`;
  return [...whole, ...any];
}

export function loadVectors(db: Db | Tx, projectId: string, repositoryId: string | null = null): Promise<StoredVector[]> {
  return db.$queryRaw<StoredVector[]>`
    SELECT c.id, c.document_id AS "documentId", c.embedding FROM rag_chunks c
    WHERE c.project_id = ${projectId} AND c.embedding IS NOT NULL ${inScope(repositoryId)} ORDER BY c.id`;
}

export interface ChunkRow {
  id: string;
  documentId: string;
  documentName: string;
  text: string;
  metadata: Prisma.JsonValue;
}

export function chunksByIds(db: Db | Tx, projectId: string, ids: string[]): Promise<ChunkRow[]> {
  if (ids.length === 0) return Promise.resolve([]);
  return db.$queryRaw<ChunkRow[]>`
    SELECT c.id, c.document_id AS "documentId", d.name AS "documentName", c.text, d.metadata
    FROM rag_chunks c JOIN rag_documents d ON d.id = c.document_id
    WHERE c.project_id = ${projectId} AND c.id = ANY(${ids}::text[])`;
}

/** The documents among `ids` that the project has (the others are refused as not found). */
export async function existingDocuments(db: Db | Tx, projectId: string, ids: string[]): Promise<Set<string>> {
  const rows = await db.ragDocument.findMany({ where: { projectId, repositoryId: null, id: { in: ids } }, select: { id: true } });
  return new Set(rows.map((r) => r.id));
}

export interface ClaimedDocument {
  id: string;
  projectId: string;
  contentSealed: string | null;
  createdBy: string;
  leaseUntil: Date;
  attempts: number;
}

/**
 * Leases the oldest due `processing` document to this worker until `leaseUntil`, in one statement (db/leases.ts, as
 * every leased row is claimed): a replica that crashed mid-way leaves its lease to expire, and the document is
 * claimed again (indexing is idempotent: a document's chunks are replaced whole).
 */
export async function claimDue(db: Db, now: Date, leaseUntil: Date): Promise<ClaimedDocument | null> {
  const rows = await claimLeases<ClaimedDocument>(db, 'rag_documents', {
    now,
    until: leaseUntil,
    limit: 1,
    due: Prisma.sql`d.status = 'processing' AND d.next_attempt_at <= ${now}`,
    orderBy: Prisma.sql`d.next_attempt_at, d.id`,
    set: Prisma.sql`attempts = u.attempts + 1`,
    returning: Prisma.sql`u.id, u.project_id AS "projectId", u.content_sealed AS "contentSealed", u.created_by AS "createdBy",
      u.lease_until AS "leaseUntil", u.attempts`,
  });
  return rows[0] ?? null;
}

/** The lease a worker holds on a document it claimed (named by its end: never renewed). */
const leaseOf = (doc: ClaimedDocument) => ({ id: doc.id, until: doc.leaseUntil });

/** Whether this worker still holds the document's lease (inside the transaction that completes it: locks the row). */
export function holdsLease(tx: Tx, doc: ClaimedDocument): Promise<boolean> {
  return holdsLeaseOn(tx, 'rag_documents', leaseOf(doc), Prisma.sql`status = 'processing'`);
}

/** Ends the lease of a document this worker still holds: retried later, or failed. */
export function releaseDocument(db: Db, doc: ClaimedDocument, data: Prisma.RagDocumentUpdateManyMutationInput): Promise<boolean> {
  return releaseLease(db, 'rag_documents', leaseOf(doc), { where: { status: 'processing' }, data });
}
