import type { Logger } from 'pino';

/**
 * A background sweep: `run` once at start and then every `everyMs` (wall time), never two at once; a count above 0 is
 * logged with `done`, a failure is logged and the next tick tries again. Used by the approval expiry, the daily usage
 * summaries and the retention purge.
 */
export function startSweep(
  log: Pick<Logger, 'info' | 'error'>,
  sweep: { run: () => Promise<number>; done: (n: number) => [Record<string, number>, string]; failed: string },
  everyMs = 60_000,
): { stop(): void } {
  let running = false;
  const tick = async () => {
    if (running) return;
    running = true;
    try {
      const n = await sweep.run();
      if (n > 0) log.info(...sweep.done(n));
    } catch (err) {
      log.error({ err }, sweep.failed);
    } finally {
      running = false;
    }
  };
  const timer = setInterval(() => void tick(), everyMs);
  timer.unref();
  void tick();
  return { stop: () => clearInterval(timer) };
}

/**
 * Lets the event loop run its timers and I/O between the items of a long job. On the embedded database every query
 * answers as a resolved promise without I/O, so a loop of queries (and in-process model calls) never leaves the
 * microtask queue: requests wait, and so does the database's own upkeep (db/pglite-maintenance.ts), whose missing
 * checkpoints stalled PGlite for good while 100,000 RAG chunks were indexed in one loop.
 */
export const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
