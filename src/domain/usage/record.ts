import type { Db } from '../../db/client.ts';
import { microsToUsd } from '../../providers/pricing.ts';
import { applySpend, type BudgetAlert } from '../budgets/service.ts';
import { enqueueEvents, type LeasedDelivery } from '../events/outbox.ts';

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
}

/** inference.completed's data (spec 2.4). */
const eventData = (o: InferenceOutcome) => ({
  request_id: o.requestId,
  route: o.route,
  cache_hit: o.cacheHit,
  cost_usd: microsToUsd(o.costMicros),
  region: o.region,
});

/**
 * Writes a batch of outcomes in ONE transaction: the usage records, their inference.completed events (with the
 * deliveries of subscribed webhooks and one wake-up), and their spend added to budget_spend with the threshold
 * alerts it crosses. Idempotent: an outcome whose usage record exists already (its batch was written before, e.g.
 * re-read after a crash) is skipped whole, so nothing is inserted, charged or delivered twice. About ten statements
 * whatever the batch size. Returns the budget alerts to e-mail once committed and, with `leaseUntil`, the webhook
 * deliveries written already leased to the caller (see enqueueEvents), to hand to this process's delivery worker.
 */
export async function persistOutcomes(
  db: Db,
  batch: readonly InferenceOutcome[],
  now: Date,
  opts: { leaseUntil?: Date } = {},
): Promise<{ alerts: BudgetAlert[]; leased: LeasedDelivery[] }> {
  const byId = new Map<string, InferenceOutcome>();
  for (const o of batch) byId.set(o.requestId, o);
  if (byId.size === 0) return { alerts: [], leased: [] };
  // A fixed order: two batches that overlap (a reclaimed entry) wait for each other instead of deadlocking.
  const outcomes = [...byId.values()].sort((a, b) => (a.requestId < b.requestId ? -1 : 1));
  return db.$transaction(
    async (tx) => {
      // One statement for the whole batch, which travels as one JSON parameter: Prisma's createMany costs ~0.5 ms of
      // gateway CPU per row, and even array parameters or per-row results cost ~0.05 ms; this costs a JSON.stringify.
      const rows = outcomes.map((o) => ({
        request_id: o.requestId,
        project_id: o.projectId,
        key_id: o.keyId,
        model: o.model,
        route: o.route,
        region: o.region,
        cache_hit: o.cacheHit,
        status: o.status,
        error_code: o.errorCode,
        prompt_tokens: o.promptTokens,
        completion_tokens: o.completionTokens,
        cost_micros: o.costMicros.toString(),
        latency_ms: o.latencyMs,
        created_at: o.createdAt.toISOString(),
      }));
      const [inserted] = await tx.$queryRaw<{ written: string | null }[]>`
        WITH u AS (
          INSERT INTO usage_records (request_id, project_id, key_id, model, route, region, cache_hit, status, error_code,
                                     prompt_tokens, completion_tokens, cost_micros, latency_ms, created_at)
          SELECT * FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS x(
            request_id text, project_id text, key_id text, model text, route text, region text, cache_hit boolean, status text,
            error_code text, prompt_tokens int, completion_tokens int, cost_micros bigint, latency_ms int, created_at timestamptz)
          ON CONFLICT (request_id) DO NOTHING
          RETURNING request_id
        )
        SELECT string_agg(request_id, ',') AS written FROM u`;
      const fresh = new Set(inserted?.written ? inserted.written.split(',') : []);
      const written = outcomes.filter((o) => fresh.has(o.requestId));
      if (written.length === 0) return { alerts: [], leased: [] };
      const { leased } = await enqueueEvents(
        tx,
        written.map((o) => ({ id: o.eventId, projectId: o.projectId, type: 'inference.completed', data: eventData(o), createdAt: o.createdAt })),
        opts,
      );
      const alerts = await applySpend(
        tx,
        written.filter((o) => o.spend && o.costMicros > 0n).map((o) => ({ projectId: o.projectId, keyId: o.spend!.keyId, period: o.spend!.period, micros: o.costMicros })),
        now,
      );
      return { alerts, leased };
    },
    { timeout: 30_000, maxWait: 10_000 },
  );
}

/** One outcome written at once (no Redis stream, or Redis refused the entry): the same transaction as a batch. */
export async function recordInferenceOutcome(db: Db, o: InferenceOutcome, now: Date = new Date()): Promise<BudgetAlert[]> {
  return (await persistOutcomes(db, [o], now)).alerts;
}

/** The write-ahead form of an outcome (a Redis stream field): JSON, money as a decimal string, times in ms. */
export function encodeOutcome(o: InferenceOutcome): string {
  return JSON.stringify({ ...o, costMicros: o.costMicros.toString(), createdAt: o.createdAt.getTime() });
}

export function decodeOutcome(text: string): InferenceOutcome {
  const raw = JSON.parse(text) as Omit<InferenceOutcome, 'costMicros' | 'createdAt'> & { costMicros: string; createdAt: number };
  return { ...raw, costMicros: BigInt(raw.costMicros), createdAt: new Date(raw.createdAt) };
}
