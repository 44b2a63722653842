import type { Db } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';
import { SvcError } from '../../errors/svc-error.ts';
import type { Clock } from '../../kernel/clock.ts';
import { keyStatus } from '../keys/service.ts';
import { SCOPES } from '../keys/scopes.ts';
import { OPERATOR_KEY_ID, keyCaller } from '../auth/service.ts';
import { headerNames, makeCtx, type Caller } from '../context.ts';
import { chunkText } from './chunking.ts';
import type { RagPorts } from './ports.ts';
import * as store from './store.ts';
import { encodeVector } from './vectors.ts';

/** Texts per embeddings call while indexing. */
export const EMBED_BATCH = 64;

export interface IndexingOptions {
  /** How long a claim holds a document (a worker that dies mid-way lets it go after this). */
  leaseMs: number;
}

export type IndexOutcome = 'ready' | 'failed' | 'retry' | 'lost';

/** Whoever uploaded the document pays for its embeddings: the key as it is now, or the operator. */
async function callerOf(db: Db, createdBy: string, projectId: string, now: Date): Promise<Caller> {
  if (createdBy === OPERATOR_KEY_ID || !createdBy.startsWith('key_')) {
    return { kind: 'operator', keyId: OPERATOR_KEY_ID, projectId: null, scopes: SCOPES };
  }
  const key = await db.apiKey.findFirst({ where: { id: createdBy, projectId } });
  if (!key || keyStatus(key, now) !== 'active') {
    throw new SvcError('invalid_api_key', { message: `The key that uploaded the document (${createdBy}) is no longer active; upload it again with an active key.` });
  }
  return keyCaller(key);
}

/**
 * Retryable refusals (a rate-limit window, a provider down) and unexpected errors (the database gone for a moment) wait
 * and try again; a refusal that cannot pass (budget, a revoked key) fails the document.
 */
function retryAfterMs(err: unknown): number | null {
  if (!(err instanceof SvcError)) return 30_000;
  if (err.code === 'rate_limit_exceeded') return Math.max(1, Number(err.headers?.['Retry-After'] ?? 1)) * 1000;
  if (err.code === 'model_unavailable' || err.code === 'routing_timeout' || err.code === 'internal_error') return 30_000;
  return null;
}

/** Attempts before a retryable failure fails the document for good. */
const MAX_ATTEMPTS = 10;

/**
 * Claims one due document and indexes it: chunks its sealed text (or, when it was indexed before and the project's
 * embedding model changed, takes its existing chunks), embeds them with the project's model if it has one (through
 * the inference pipeline, as the key that uploaded it), then in one transaction replaces its chunks, marks it ready
 * and drops the sealed text, all only while this worker still holds the lease. Returns null when nothing was due.
 */
export async function indexNextDocument(ports: RagPorts, db: Db, clock: Clock, opts: IndexingOptions): Promise<{ documentId: string; outcome: IndexOutcome } | null> {
  const now = new Date(clock.now());
  const claimed = await store.claimDue(db, now, new Date(now.getTime() + opts.leaseMs));
  if (!claimed) return null;
  const doc = claimed;
  try {
    let chunks: { id: string; text: string }[];
    let fresh: boolean;
    if (doc.contentSealed !== null) {
      const text = ports.sealer.open(doc.contentSealed, doc.id);
      chunks = chunkText(text).map((t) => ({ id: newId('chk', now.getTime()), text: t }));
      fresh = true;
    } else {
      chunks = await store.chunkTextsOf(db, doc.id);
      fresh = false;
    }
    const settings = await store.settingsOf(db, doc.projectId);
    const vectors: (Uint8Array | null)[] = chunks.map(() => null);
    if (settings.embeddingModel && chunks.length > 0) {
      const caller = await callerOf(db, doc.createdBy, doc.projectId, now);
      const ctx = makeCtx({ db, clock }, { requestId: newId('req', now.getTime()), caller, ip: null, project: headerNames(doc.projectId) });
      for (let i = 0; i < chunks.length; i += EMBED_BATCH) {
        const batch = chunks.slice(i, i + EMBED_BATCH);
        const out = await ports.embed(ctx, doc.projectId, settings.embeddingModel, batch.map((c) => c.text));
        out.forEach((v, j) => (vectors[i + j] = encodeVector(v)));
      }
    }
    const done = await db.$transaction(async (tx) => {
      if (!(await store.holdsLease(tx, doc))) return false;
      if (fresh) {
        await tx.ragChunk.deleteMany({ where: { documentId: doc.id } });
        await store.insertChunks(tx, doc.id, doc.projectId, chunks.map((c, i) => ({ id: c.id, ordinal: i, text: c.text, embedding: vectors[i]! })));
      } else {
        await store.setEmbeddings(tx, chunks.flatMap((c, i) => (vectors[i] ? [{ id: c.id, embedding: vectors[i]! }] : [])));
      }
      await tx.ragDocument.update({
        where: { id: doc.id },
        data: { status: 'ready', chunks: chunks.length, error: null, contentSealed: null, leaseUntil: null, indexedAt: new Date(clock.now()) },
      });
      await store.bumpVersion(tx, doc.projectId);
      return true;
    });
    return { documentId: doc.id, outcome: done ? 'ready' : 'lost' };
  } catch (err) {
    const wait = retryAfterMs(err);
    const later = new Date(clock.now() + (wait ?? 0));
    if (wait !== null && doc.attempts < MAX_ATTEMPTS) {
      await store.releaseDocument(db, doc, { nextAttemptAt: later });
      // The worker logs an unexpected error (without the document's content).
      if (!(err instanceof SvcError)) throw err;
      return { documentId: doc.id, outcome: 'retry' };
    }
    const message = err instanceof SvcError ? `${err.code}: ${err.message}` : 'internal_error: indexing failed unexpectedly.';
    await store.releaseDocument(db, doc, { status: 'failed', error: message.slice(0, 1000), contentSealed: null });
    if (!(err instanceof SvcError)) throw err;
    return { documentId: doc.id, outcome: 'failed' };
  }
}
