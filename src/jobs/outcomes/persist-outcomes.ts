import type { SqlDriver } from '../../db/sql.ts';
import { applySpend } from '../../domain/budgets/service.ts';
import type { BudgetAlert } from '../../domain/budgets/types.ts';
import { enqueueEvents, type LeasedDelivery } from '../../domain/events/outbox.ts';
import { inferenceCompletedData, type InferenceOutcome } from '../../domain/usage/outcome.ts';
import type { ContentSealer } from '../../domain/privacy/ports.ts';
import { insertRetainedInferences } from '../../domain/privacy/store.ts';
import { insertUsageRecords } from './store.ts';
import { registerCustomers } from '../../domain/customers/store.ts';

/**
 * Writes a batch of outcomes in ONE transaction: the usage records, their inference.completed events (with the
 * deliveries of subscribed webhooks and one wake-up), their retained content (sealed here, row by row), and their
 * spend added to budget_spend with the threshold alerts it crosses. Idempotent: an outcome whose usage record exists
 * already (its batch was written before, e.g. re-read after a crash) is skipped whole, so nothing is inserted, charged
 * or delivered twice. About ten statements whatever the batch size, run on the driver directly (db/sql.ts): through
 * Prisma, the batch's large JSON parameters were encoded and decoded once more on their way. Returns the budget alerts
 * to e-mail once committed and, with `leaseUntil`, the webhook deliveries written already leased to the caller (see
 * enqueueEvents), to hand to this process's delivery worker.
 */
export async function persistOutcomes(
  { sql, sealer }: { sql: SqlDriver; sealer: ContentSealer },
  batch: readonly InferenceOutcome[],
  now: Date,
  opts: { leaseUntil?: Date } = {},
): Promise<{ alerts: BudgetAlert[]; leased: LeasedDelivery[] }> {
  const byId = new Map<string, InferenceOutcome>();
  for (const o of batch) byId.set(o.requestId, o);
  if (byId.size === 0) return { alerts: [], leased: [] };
  // A fixed order: two batches that overlap (a reclaimed entry) wait for each other instead of deadlocking.
  const outcomes = [...byId.values()].sort((a, b) => (a.requestId < b.requestId ? -1 : 1));
  return sql.transaction(async (tx) => {
    const fresh = await insertUsageRecords(tx, outcomes);
    const written = outcomes.filter((o) => fresh.has(o.requestId));
    if (written.length === 0) return { alerts: [], leased: [] };
    // CONTRACT §12: the retained content of the inferences, sealed row by row, in the same transaction.
    await insertRetainedInferences(tx, sealer, written);
    // CONTRACT §22: the end customers the batch names, first seen (one statement, none when no outcome names one).
    await registerCustomers(tx, written);
    const { leased } = await enqueueEvents(
      tx,
      written.map((o) => ({ id: o.eventId, projectId: o.projectId, type: 'inference.completed', data: inferenceCompletedData(o), createdAt: o.createdAt })),
      opts,
    );
    const alerts = await applySpend(
      tx,
      written
        .filter((o) => o.spend && o.costMicros > 0n)
        .map((o) => ({ projectId: o.projectId, keyId: o.spend!.keyId, customer: o.customer ?? null, period: o.spend!.period, micros: o.costMicros })),
      now,
    );
    return { alerts, leased };
  });
}
