import type { RetainedRecord } from '../privacy/types.ts';
import { microsToUsd } from '../../kernel/money.ts';
import type { ProviderHop } from '../../providers/router.ts';

/** How one inference ended: the usage record (CONTRACT §8) and the inference.completed event are made from it. */
export interface InferenceOutcome {
  requestId: string;
  projectId: string;
  keyId: string;
  /** The model that answered, or the requested one ("auto" included) when none did. */
  model: string;
  /** "<provider>/<model>" of the route that answered or was tried last; null when no provider was reached. */
  route: string | null;
  region: string | null;
  cacheHit: boolean;
  status: 'succeeded' | 'failed';
  errorCode: string | null;
  promptTokens: number;
  completionTokens: number;
  costMicros: bigint;
  latencyMs: number;
  createdAt: Date;
  /** The evt_ id of its inference.completed, chosen when the outcome is accepted: written again, it is written once. */
  eventId: string;
  /**
   * The budget scopes charged `costMicros` on the request path (the project's, and the key's unless the operator
   * called) and the month charged; null when nothing was charged. budget_spend gets it with the outcome.
   */
  spend: { keyId: string | null; period: string } | null;
  /** CONTRACT §12: the inference's retained record (sealed content, or the id alone); written with the usage record. */
  retained?: RetainedRecord | null;
  /** The prompt template the inference used (CONTRACT §10); absent when none. */
  templateId?: string | null;
  templateVersion?: number | null;
  /** The end customer the inference named (CONTRACT §22); absent when none. Its budget scope is charged with the spend. */
  customer?: string | null;
  /** The request's W3C trace id (domain/inference/tracker.ts traceIdOf); absent on outcomes queued by an earlier version. */
  traceId?: string | null;
  /** Where the request spent its time; absent on outcomes queued by an earlier version. */
  timings?: RequestTimings | null;
}

/**
 * Where one request spent its time, kept on its usage record (column `timings`) for the request detail's timeline
 * (timeline.ts). Every figure is in milliseconds (0.1 ms precision) from the request's start on a monotonic clock
 * (performance.now()): the start is the auth hook's first instruction, or, for work without a request of its own (batch
 * lines, evaluation cases, the verticals' jobs), the start of the inference itself. The inference's tracker makes it
 * (domain/inference/tracker.ts).
 */
export interface RequestTimings {
  /** End of the auth hook: key lookup, the request window, the scope check. Null: no request of its own. */
  authenticatedMs: number | null;
  /** The inference began (body read and validated, project and customer resolved): the record's created_at. */
  validatedMs: number;
  /** Admitted: the budget check, the cache lookup and the token reservation passed. Null: it stopped before. */
  admittedMs: number | null;
  /** The provider hops in order (fallbacks and circuit-open skips included); empty when no provider was asked. */
  hops: readonly ProviderHop[];
  /** The answer was complete (a stream's last part, or a cache hit). Null: none came. */
  answeredMs: number | null;
  /** The outcome handed to the outcome writer: the end of the gateway's work on it. */
  totalMs: number;
}

/** inference.completed's data (spec 2.4). */
export const inferenceCompletedData = (o: InferenceOutcome) => ({
  request_id: o.requestId,
  route: o.route,
  cache_hit: o.cacheHit,
  cost_usd: microsToUsd(o.costMicros),
  region: o.region,
  ...(o.templateId ? { template_id: o.templateId, template_version: o.templateVersion ?? null } : {}),
});
