import type { RetainedRecord } from '../privacy/types.ts';
import { microsToUsd } from '../../kernel/money.ts';
import type { RequestTimings } from './timings.ts';

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
  /** The request's W3C trace id (timings.ts traceIdOf); absent on outcomes queued by an earlier version. */
  traceId?: string | null;
  /** Where the request spent its time (timings.ts); absent on outcomes queued by an earlier version. */
  timings?: RequestTimings | null;
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
