import type { Db } from '../../db/client.ts';
import { microsToUsd } from '../../providers/pricing.ts';
import { enqueueEvent } from '../events/outbox.ts';

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
}

/**
 * Writes the usage record and emits inference.completed (spec 2.4 data) in one transaction: one of each per finished
 * inference. Kept as one function so that moving the write off the request path (batched) stays a local change.
 */
export async function recordInferenceOutcome(db: Db, o: InferenceOutcome): Promise<void> {
  await db.$transaction(async (tx) => {
    await tx.usageRecord.create({
      data: {
        requestId: o.requestId,
        projectId: o.projectId,
        keyId: o.keyId,
        model: o.model,
        route: o.route,
        region: o.region,
        cacheHit: o.cacheHit,
        status: o.status,
        errorCode: o.errorCode,
        promptTokens: o.promptTokens,
        completionTokens: o.completionTokens,
        costMicros: o.costMicros,
        latencyMs: o.latencyMs,
        createdAt: o.createdAt,
      },
    });
    await enqueueEvent(tx, o.createdAt, o.projectId, 'inference.completed', {
      request_id: o.requestId,
      route: o.route,
      cache_hit: o.cacheHit,
      cost_usd: microsToUsd(o.costMicros),
      region: o.region,
    });
  });
}
