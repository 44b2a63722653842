import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { yieldToEventLoop } from './sweep.ts';

/** What a pool claims and works on: leased rows of one table (db/leases.ts), named by their id. */
export interface LeasedWork<T, R> {
  /** For the logs: 'batch runner', 'eval runner', 'vertical work'. */
  name: string;
  /**
   * Leases up to `limit` due items to this worker, leaving out `working` (those this process is working on already:
   * their lease is its own, and a renewed lease must not make them claimable twice).
   */
  claim(limit: number, working: ReadonlySet<string>): Promise<T[]>;
  idOf(item: T): string;
  /** Works one claimed item to its end; a throw is logged and the item resumes once its lease passes. */
  work(item: T): Promise<R>;
  /** The log field naming an item ('batch_id', 'eval_id'; default 'id'). */
  idField?: string;
  /** Before each round of claims (a batch runner purges expired files there). */
  beforeClaim?(): Promise<unknown>;
}

export interface LeasedPoolOptions {
  /** How often the pool looks for due items (wall time). */
  pollMs: number;
  /** Items worked on at once by this process (one tenant's long item does not hold the others back). */
  maxActive: number;
  /** Items leased per claim (default 1); more than `maxActive` wait in the pool's queue, their leases running. */
  claimSize?: number;
}

/**
 * The claim-and-fill loop every leased background worker shares (batches, evaluation runs, the verticals' jobs): a
 * timer and each finished item fill the pool up to `maxActive` items, each leased by a claim (`FOR UPDATE SKIP
 * LOCKED`, so replicas never take the same one); `runPending` works everything due now, one item after the other (the
 * tests' and the CLI's way); `stop` ends polling, wakes every `sleep` and waits for the items in hand. A worker that
 * dies leaves its items to whichever claims them after their leases pass.
 */
export class LeasedPool<T, R = void> {
  /** This process's lease owner (`lease_owner` of the tables that record one). */
  readonly owner = `wrk_${randomBytes(6).toString('hex')}`;
  private readonly working = new Set<string>();
  private readonly active = new Set<Promise<unknown>>();
  private readonly queue: T[] = [];
  private readonly sleepers = new Set<() => void>();
  private timer: NodeJS.Timeout | null = null;
  private claiming = false;
  private halted = false;
  private readonly claimSize: number;

  constructor(
    private readonly log: Pick<Logger, 'error'>,
    private readonly spec: LeasedWork<T, R>,
    private readonly opts: LeasedPoolOptions,
  ) {
    this.claimSize = Math.max(1, opts.claimSize ?? 1);
  }

  /** True once stop() was called: the items in hand end at their next step and resume elsewhere after their lease. */
  get stopped(): boolean {
    return this.halted;
  }

  /** Waits `ms` (wall time); stop() ends the wait at once. */
  sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.sleepers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      timer.unref();
      this.sleepers.add(wake);
    });
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.fill(), this.opts.pollMs);
    this.timer.unref();
    this.fill();
  }

  async stop(): Promise<void> {
    this.halted = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    for (const wake of [...this.sleepers]) wake();
    await Promise.all([...this.active]);
  }

  /** Works every item it can claim, one after the other, until a claim comes back short; returns their results. */
  async runPending(): Promise<R[]> {
    const results: R[] = [];
    while (!this.halted) {
      await this.spec.beforeClaim?.();
      const items = await this.spec.claim(this.claimSize, this.working);
      for (const item of items) results.push(await this.workOne(item));
      if (items.length < this.claimSize) break;
      await yieldToEventLoop();
    }
    return results;
  }

  private fill(): void {
    if (this.halted || this.claiming) return;
    this.claiming = true;
    void (async () => {
      try {
        if (this.queue.length === 0) await this.spec.beforeClaim?.();
        while (!this.halted && this.active.size < this.opts.maxActive) {
          if (this.queue.length === 0) {
            this.queue.push(...(await this.spec.claim(this.claimSize, this.working)));
            if (this.queue.length === 0) break;
          }
          const item = this.queue.shift()!;
          const running: Promise<unknown> = this.workOne(item)
            .catch((err: unknown) => this.log.error({ err, [this.spec.idField ?? 'id']: this.spec.idOf(item) }, `${this.spec.name}: an item failed to proceed; it resumes once its lease passes`))
            .finally(() => {
              this.active.delete(running);
              this.fill();
            });
          this.active.add(running);
        }
      } catch (err) {
        this.log.error({ err }, `${this.spec.name}: claiming failed; retrying`);
      } finally {
        this.claiming = false;
      }
    })();
  }

  private async workOne(item: T): Promise<R> {
    const id = this.spec.idOf(item);
    this.working.add(id);
    try {
      return await this.spec.work(item);
    } finally {
      this.working.delete(id);
    }
  }
}

/**
 * Runs `step` over `queue` with `concurrency` workers at once until the queue is empty or `stopping()`; meanwhile
 * `keepAlive` renews the item's lease every `everyMs` (one slow step must not let the lease pass while this worker
 * lives, or another worker would take the item over and make the same calls).
 */
export async function drainWithLease<L>(
  queue: L[],
  concurrency: number,
  stopping: () => boolean,
  step: (line: L) => Promise<void>,
  keepAlive: { everyMs: number; renew: () => Promise<unknown> },
): Promise<void> {
  const worker = async () => {
    for (;;) {
      if (stopping()) return;
      const next = queue.shift();
      if (next === undefined) return;
      await step(next);
    }
  };
  const timer = setInterval(() => void keepAlive.renew().catch(() => undefined), Math.max(250, keepAlive.everyMs));
  timer.unref();
  try {
    await Promise.all(Array.from({ length: Math.max(1, concurrency) }, worker));
  } finally {
    clearInterval(timer);
  }
}
