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
