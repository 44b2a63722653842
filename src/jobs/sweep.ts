import type { Logger } from 'pino';
import type { Leadership } from '../db/leadership.ts';

/** Which replica runs a sweep: the database's leadership (`deps.database.leadership`) and the sweep's own name. */
export interface SweepLeader {
  leadership: Leadership;
  /** One lead per name (and schema): e.g. 'approval-expiry'. */
  name: string;
}

/**
 * A background sweep: `run` once at start and then every `everyMs` (wall time), never two at once; a count above 0 is
 * logged with `done`, a failure is logged and the next tick tries again. Used by the approval expiry, the daily usage
 * summaries, the retention purge and the partition upkeep.
 *
 * With `leader` (CONTRACT §18: one replica at a time), each tick first asks for the lead and runs only while this
 * process holds it (db/leadership.ts: a PostgreSQL advisory lock on the direct session; the embedded database always
 * leads). A replica that loses its leader takes over on its first tick after the lock is released: within one
 * period of the leader's death (a crashed process closes its connection at once), DEAD_PEER_S longer for a vanished
 * host; so within 2 × `everyMs` whenever `everyMs` ≥ 25 s. `stop()` gives the lead up.
 */
export function startSweep(
  log: Pick<Logger, 'info' | 'error'>,
  sweep: { run: () => Promise<number>; done: (n: number) => [Record<string, number>, string]; failed: string },
  everyMs = 60_000,
  leader?: SweepLeader,
): { stop(): void } {
  let running = false;
  let stopped = false;
  const tick = async () => {
    if (running || stopped) return;
    running = true;
    try {
      if (leader && !(await leader.leadership.lead(leader.name))) return;
      if (stopped) return;
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
  return {
    stop: () => {
      stopped = true;
      clearInterval(timer);
      if (leader) void leader.leadership.release(leader.name);
    },
  };
}

/**
 * Lets the event loop run its timers and I/O between the items of a long job. On the embedded database every query
 * answers as a resolved promise without I/O, so a loop of queries (and in-process model calls) never leaves the
 * microtask queue: requests wait, and so does the database's own upkeep (db/pglite-maintenance.ts), whose missing
 * checkpoints stalled PGlite for good while 100,000 RAG chunks were indexed in one loop.
 */
export const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
