import { isUniqueViolation } from '../../db/client.ts';
import { microsToUsd } from '../../providers/pricing.ts';
import type { Deps } from '../context.ts';
import { enqueueEvent } from '../events/outbox.ts';
import { utcDate } from './service.ts';

const DAY_MS = 86_400_000;
/** A day is summarised this long after it ends, so that inferences still running at midnight are counted in it. */
export const SUMMARY_GRACE_MS = 15 * 60_000;

/**
 * usage.daily_summary: once per UTC day, one event per project that had usage that day, with the day's totals. Safe to
 * run often and on every replica: a settings row per day (`usage_daily_summary:YYYY-MM-DD`) is written in the same
 * transaction as the events, so only one run emits them. Returns the number of events emitted.
 */
export async function emitDailyUsageSummaries(deps: Deps, nowMs: number = deps.clock.now()): Promise<number> {
  const day = utcDate(new Date(nowMs - SUMMARY_GRACE_MS - DAY_MS));
  const marker = `usage_daily_summary:${day}`;
  if (await deps.db.setting.findUnique({ where: { key: marker } })) return 0;
  // Usage records are written in batches off the request path: this replica's are in before the day is summed.
  await deps.outcomes.flush({ timeoutMs: 5_000 });
  const from = new Date(`${day}T00:00:00Z`);
  const to = new Date(from.getTime() + DAY_MS);
  const now = new Date(nowMs);
  try {
    return await deps.db.$transaction(async (tx) => {
      await tx.setting.create({ data: { key: marker, value: now.toISOString() } });
      const rows = await tx.$queryRaw<
        Array<{ project_id: string; requests: bigint; succeeded: bigint; prompt: bigint; completion: bigint; cost: bigint }>
      >`
        SELECT project_id,
               count(*)::bigint AS requests,
               count(*) FILTER (WHERE status = 'succeeded')::bigint AS succeeded,
               coalesce(sum(prompt_tokens), 0)::bigint AS prompt,
               coalesce(sum(completion_tokens), 0)::bigint AS completion,
               coalesce(sum(cost_micros), 0)::bigint AS cost
          FROM usage_records
         WHERE created_at >= ${from} AND created_at < ${to}
         GROUP BY project_id
         ORDER BY project_id`;
      for (const r of rows) {
        await enqueueEvent(tx, now, r.project_id, 'usage.daily_summary', {
          project_id: r.project_id,
          date: day,
          requests: Number(r.requests),
          succeeded: Number(r.succeeded),
          failed: Number(r.requests - r.succeeded),
          prompt_tokens: Number(r.prompt),
          completion_tokens: Number(r.completion),
          cost_usd: microsToUsd(BigInt(r.cost)),
        });
      }
      return rows.length;
    });
  } catch (err) {
    if (isUniqueViolation(err)) return 0; // another replica summarised the day first
    throw err;
  }
}

/** Checks every minute (wall time) whether a day is due on the injected clock. */
export function startDailyUsageSummaries(deps: Deps, everyMs = 60_000): { stop(): void } {
  let running = false;
  const tick = async () => {
    if (running) return;
    running = true;
    try {
      const n = await emitDailyUsageSummaries(deps);
      if (n > 0) deps.log.info({ projects: n }, 'usage.daily_summary emitted');
    } catch (err) {
      deps.log.error({ err }, 'usage.daily_summary failed; retrying next minute');
    } finally {
      running = false;
    }
  };
  const timer = setInterval(() => void tick(), everyMs);
  timer.unref();
  void tick();
  return { stop: () => clearInterval(timer) };
}
