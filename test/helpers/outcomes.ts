import { newId } from '../../src/db/ids.ts';
import { periodOf } from '../../src/domain/budgets/service.ts';
import type { InferenceOutcome } from '../../src/domain/usage/outcome.ts';

/** A finished inference as the outcome writer receives it (a priced mock route), charged to the key and its project. */
export function testOutcome(projectId: string, keyId: string, at: Date, costMicros = 0n): InferenceOutcome {
  return {
    requestId: newId('req'),
    projectId,
    keyId,
    model: 'mock-priced',
    route: 'priced/mock-priced',
    region: 'local',
    cacheHit: false,
    status: 'succeeded',
    errorCode: null,
    promptTokens: 3,
    completionTokens: 2,
    costMicros,
    latencyMs: 1,
    createdAt: at,
    eventId: newId('evt', at.getTime()),
    spend: { keyId, period: periodOf(at) },
  };
}
