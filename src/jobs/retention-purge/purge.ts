import type { Deps } from '../../deps.ts';
import { purgeExpiredContent } from '../../domain/privacy/store.ts';

type PurgeDeps = Pick<Deps, 'db' | 'clock' | 'log'>;

/** Rows per statement: a long backlog is purged in short transactions. */
const BATCH = 1_000;

/**
 * One sweep (CONTRACT §12): the content of every retained inference past its end on the injected clock is deleted;
 * the id stays (GET /v1/inference/{id} answers record_not_retained), and usage records (no content) are untouched.
 * Returns how many records were purged.
 */
export async function purgeExpiredRetention(deps: Pick<Deps, 'db' | 'clock'>): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await purgeExpiredContent(deps.db, new Date(deps.clock.now()), BATCH);
    total += n;
    if (n < BATCH) return total;
  }
}

/** The background worker's retention sweep, every minute (wall time) and once at start. */
export function startRetentionPurge(deps: PurgeDeps, everyMs = 60_000): { stop(): void } {
  let running = false;
  const tick = async () => {
    if (running) return;
    running = true;
    try {
      const n = await purgeExpiredRetention(deps);
      if (n > 0) deps.log.info({ records: n }, 'retained content purged');
    } catch (err) {
      deps.log.error({ err }, 'retention purge failed; retrying next minute');
    } finally {
      running = false;
    }
  };
  const timer = setInterval(() => void tick(), everyMs);
  timer.unref();
  void tick();
  return { stop: () => clearInterval(timer) };
}
