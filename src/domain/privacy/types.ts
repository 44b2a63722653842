import type { ChatMessage } from '../../providers/types.ts';
import type { PiiCounts } from './pii.ts';

/** What is retained of an answer: the result's fields (the retrieval presents them again). */
export interface RetainedResult {
  id: string;
  requestId: string;
  createdAt: Date;
  model: string;
  route: string;
  region: string;
  cacheHit: boolean;
  content: string;
  finishReason: string;
  toolCalls?: unknown;
  promptTokens: number;
  completionTokens: number;
  costMicros: bigint;
}

/** The content of a retained inference (CONTRACT §12): JSON inside the seal. */
export interface RetainedContent {
  request: { model: string; messages: ChatMessage[] };
  response: (Omit<RetainedResult, 'createdAt' | 'costMicros'> & { createdAt: number; costMicros: string; pii?: { redacted: PiiCounts } }) | null;
}

/**
 * The retained record handed with the outcome to the outcome writer (written off the request path). Its content is in
 * clear only in memory: wherever it is written (the database row, the usage stream, a dead letter, a log) it is sealed
 * (privacy/store.ts, sealedContent).
 */
export interface RetainedRecord {
  inferenceId: string;
  status: 'succeeded' | 'failed';
  /** The {request, response} in clear; null under zero retention. */
  content?: RetainedContent | null;
  /**
   * The same content sealed (AES-256-GCM, the inference id as associated data): the form at rest, as the database row
   * holds it. Set instead of `content` on a dead letter, a log line, or an entry an earlier version wrote.
   */
  sealed?: string | null;
  /** ms since the epoch; null under zero retention. */
  retainedUntil: number | null;
}
