import type { Deps } from '../../deps.ts';
import { indexNextDocument, type IndexOutcome } from '../../domain/rag/indexing.ts';
import { yieldToEventLoop } from '../sweep.ts';

type IndexerDeps = Pick<Deps, 'db' | 'clock' | 'log' | 'ports'>;

export interface RagIndexerOptions {
  /** How long a claim holds a document; a worker that dies leaves it to be claimed again after this (default 5 min). */
  leaseMs?: number;
  /** Wall time between looks when nothing is due (default 1 s). */
  idleMs?: number;
}

const DEFAULT_LEASE_MS = 5 * 60_000;

/**
 * Indexes every due document, one after the other, until none is due (tests call it directly; the worker loops on
 * it). Returns what happened to each.
 */
export async function indexDueDocuments(deps: IndexerDeps, opts: RagIndexerOptions = {}): Promise<{ documentId: string; outcome: IndexOutcome }[]> {
  const done: { documentId: string; outcome: IndexOutcome }[] = [];
  for (;;) {
    const r = await indexNextDocument(deps.ports.rag, deps.db, deps.clock, { leaseMs: opts.leaseMs ?? DEFAULT_LEASE_MS });
    if (!r) return done;
    done.push(r);
    // A retry is due later: leave the loop rather than spin on it.
    if (r.outcome === 'retry') return done;
    await yieldToEventLoop();
  }
}

/**
 * The background worker's RAG indexing (CONTRACT §13): claims `processing` documents with a lease in SQL
 * (domain/rag/store.ts claimDue), so any number of replicas share the work and a document a crashed or restarted
 * worker held is picked up again once its lease ends. Logs ids and outcomes, never content.
 */
export function startRagIndexer(deps: IndexerDeps, opts: RagIndexerOptions = {}): { stop(): Promise<void> } {
  const idleMs = opts.idleMs ?? 1_000;
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  const tick = async () => {
    timer = null;
    try {
      const done = await indexDueDocuments(deps, opts);
      for (const d of done) {
        if (d.outcome === 'failed') deps.log.warn({ document_id: d.documentId }, 'rag document indexing failed');
        else deps.log.debug({ document_id: d.documentId, outcome: d.outcome }, 'rag document indexed');
      }
    } catch (err) {
      deps.log.error({ err }, 'rag indexing failed; retrying');
    }
    if (!stopped) {
      timer = setTimeout(() => (running = tick()), idleMs);
      timer.unref();
    }
  };
  running = tick();
  return {
    stop: async () => {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
