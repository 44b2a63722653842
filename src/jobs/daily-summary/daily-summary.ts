import { isUniqueViolation } from '../../db/client.ts';
import { microsToUsd } from '../../kernel/money.ts';
import type { Deps } from '../../deps.ts';
import { enqueueEvent } from '../../domain/events/outbox.ts';
import { utcDate } from '../../domain/usage/service.ts';
import { dayTotals, hasMarker, insertMarker } from './store.ts';
import { startSweep } from '../sweep.ts';

const DAY_MS = 86_400_000;
/** A day is summarised this long after it ends, so that inferences still running at midnight are counted in it. */
export const SUMMARY_GRACE_MS = 15 * 60_000;

type SummaryDeps = Pick<Deps, 'db' | 'clock' | 'log' | 'outcomes'>;

/**
 * usage.daily_summary: once per UTC day, one event per project that had usage that day, with the day's totals. Safe to
 * run often and on every replica: a settings row per day (`usage_daily_summary:YYYY-MM-DD`) is written in the same
 * transaction as the events, so only one run emits them. Returns the number of events emitted.
 */
export async function emitDailyUsageSummaries(deps: SummaryDeps, nowMs: number = deps.clock.now()): Promise<number> {
  const day = utcDate(new Date(nowMs - SUMMARY_GRACE_MS - DAY_MS));
  const marker = `usage_daily_summary:${day}`;
  if (await hasMarker(deps.db, marker)) return 0;
  // Usage records are written in batches off the request path: this replica's are in before the day is summed.
  await deps.outcomes.flush({ timeoutMs: 5_000 });
  const from = new Date(`${day}T00:00:00Z`);
  const to = new Date(from.getTime() + DAY_MS);
  const now = new Date(nowMs);
  try {
    return await deps.db.$transaction(async (tx) => {
      await insertMarker(tx, marker, now);
      const rows = await dayTotals(tx, from, to);
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

/** Checks every minute (wall time) whether a day is due on the injected clock; on the replica that leads the sweep. */
export function startDailyUsageSummaries(deps: SummaryDeps & Pick<Deps, 'database'>, everyMs = 60_000): { stop(): void } {
  return startSweep(
    deps.log,
    { run: () => emitDailyUsageSummaries(deps), done: (n) => [{ projects: n }, 'usage.daily_summary emitted'], failed: 'usage.daily_summary failed; retrying next minute' },
    everyMs,
    { leadership: deps.database.leadership, name: 'daily-summary' },
  );
}
