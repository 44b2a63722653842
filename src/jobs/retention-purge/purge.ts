import type { Deps } from '../../deps.ts';
import { purgeExpiredFiles } from '../../domain/batches/files.ts';
import { purgeExpiredContent } from '../../domain/privacy/store.ts';
import { startSweep, yieldToEventLoop } from '../sweep.ts';

type PurgeDeps = Pick<Deps, 'db' | 'clock' | 'log' | 'database'>;

/** Rows per statement: a long backlog is purged in short transactions. */
const BATCH = 1_000;

/**
 * One sweep (CONTRACT §12): the content of every retained inference past its end on the injected clock is deleted;
 * the id stays (GET /v1/inference/{id} answers record_not_retained), and usage records (no content) are untouched.
 * Batch files' content (their sealed chunks) goes by the same rules. Returns how many records and files were purged.
 */
export async function purgeExpiredRetention(deps: Pick<Deps, 'db' | 'clock'>): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await purgeExpiredContent(deps.db, new Date(deps.clock.now()), BATCH);
    total += n;
    if (n < BATCH) break;
    await yieldToEventLoop();
  }
  return total + (await purgeExpiredFiles(deps.db, new Date(deps.clock.now())));
}

/** The background worker's retention sweep, every minute (wall time) and once at start, on the sweep's leader only. */
export function startRetentionPurge(deps: PurgeDeps, everyMs = 60_000): { stop(): void } {
  return startSweep(
    deps.log,
    { run: () => purgeExpiredRetention(deps), done: (n) => [{ records: n }, 'retained content purged'], failed: 'retention purge failed; retrying next minute' },
    everyMs,
    { leadership: deps.database.leadership, name: 'retention-purge' },
  );
}
