import { newId } from '../../src/db/ids.ts';
import { periodOf } from '../../src/domain/budgets/service.ts';
import type { InferenceOutcome } from '../../src/domain/usage/outcome.ts';
import { RedisOutcomeWriter } from '../../src/jobs/outcomes/redis-stream.ts';
import type { Redis } from '../../src/redis/connection.ts';
import type { TestApp } from './app.ts';

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

/** A usage-stream writer of the test app's own pieces on `redis`, under `prefix` (a 5 s lease, 20 ms batches); not consuming until start(). */
export function redisOutcomeWriter(t: TestApp, redis: Redis, prefix: string): RedisOutcomeWriter {
  const { deps } = t;
  return new RedisOutcomeWriter(
    { sql: deps.database.sql, sealer: deps.webhooks.secretBox, clock: deps.clock, log: deps.log, handoff: deps.webhooks.worker, alerts: deps.budgetAlerts, flushMs: 20 },
    redis,
    prefix,
    5_000,
  );
}
