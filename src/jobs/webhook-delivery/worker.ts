import type { Deps } from '../../deps.ts';
import type { DeliveryWorkerControl } from '../../domain/events/ports.ts';
import { claimDeliveries, handoffLease, releaseUnsent, type Claimed } from './claim.ts';
import { AttemptRecorder, type AttemptOutcome } from './record.ts';
import { DeliverySender } from './send.ts';
import { nextDueMs } from './store.ts';
import { listenForWakeups } from './wakeup-listener.ts';
import { InFlight } from '../../kernel/in-flight.ts';

export type { AttemptOutcome };

/** Read from config: webhookRetryScheduleS, webhookRetryHorizonS, webhookTimeoutMs. */
export type DeliveryWorkerDeps = Pick<Deps, 'config' | 'db' | 'database' | 'clock' | 'log'> & Pick<Deps['webhooks'], 'secretBox' | 'egress'>;

export interface DeliveryWorkerOptions {
  /** The receiver's deadline (spec 6.1.2: 10 s); default config.webhookTimeoutMs. */
  timeoutMs?: number;
  /** How long a claim holds a delivery; past it, another worker may retry it (a crashed worker's claim). */
  leaseMs?: number;
  /** Deliveries claimed per statement. */
  batchSize?: number;
  /** Attempts in flight at once, per worker. */
  concurrency?: number;
  /** The safety net when no wake-up arrives (e.g. a connection pooler that drops LISTEN). */
  pollIntervalMs?: number;
  /** Test only: trust this CA (the test receiver's) instead of the system's; production uses NODE_EXTRA_CA_CERTS. */
  ca?: string | Buffer | Array<string | Buffer>;
  /** Subscribe to wake-ups (LISTEN/NOTIFY) when started; default true. */
  listen?: boolean;
  /** Told of each attempt's outcome (the /metrics counters, src/observability); never awaited. */
  onAttempt?: (outcome: AttemptOutcome) => void;
}

const MIN_RECHECK_MS = 25;
/** Handed-over deliveries started per turn of the event loop (see sendHandedOver()). */
const ATTEMPTS_PER_TURN = 8;

/**
 * Sends webhook deliveries: at least once, each attempt by one worker among all replicas.
 *
 * Each attempt is claim (claim.ts: a lease taken in one statement, or handed over leased by the outcome writer), send
 * (send.ts: the signed POST) and record (record.ts: the attempt, the retry schedule, the audit). Wakes on NOTIFY from
 * the outbox (one listening worker, picked at commit: domain/webhooks/wakeups.ts), on its own retries coming due, and on a slow poll. Tests drive it with
 * `runDue()` and a fake clock.
 */
export class DeliveryWorker implements DeliveryWorkerControl {
  readonly timeoutMs: number;
  readonly leaseMs: number;
  private readonly batchSize: number;
  private readonly concurrency: number;
  private readonly pollIntervalMs: number;
  private readonly listen: boolean;
  private readonly sender: DeliverySender;
  private readonly recorder: AttemptRecorder;
  private readonly onAttempt: ((outcome: AttemptOutcome) => void) | undefined;

  private running = false;
  private loop: Promise<void> | null = null;
  private rerun = false;
  /** The last drain stopped because every slot was busy: a finishing attempt must drain again. */
  private slotsFull = false;
  /** The attempts running (a list, not a Set: one comes and goes with every delivery; kernel/in-flight.ts). */
  private readonly inflight = new InFlight<Promise<unknown>>();
  private timer: NodeJS.Timeout | null = null;
  private timerDue = Infinity;
  private unlisten: (() => Promise<void>) | null = null;
  private stopping: Promise<void> | null = null;
  private handoffScheduled = false;
  /** Deliveries the outcome writer wrote leased to this worker, waiting for a slot. */
  private handedOver: Claimed[] = [];

  constructor(
    private readonly deps: DeliveryWorkerDeps,
    opts: DeliveryWorkerOptions = {},
  ) {
    this.timeoutMs = opts.timeoutMs ?? deps.config.webhookTimeoutMs;
    // Longer than an attempt can take (deadline + recording it), so a live worker's claim never expires under it.
    this.leaseMs = opts.leaseMs ?? this.timeoutMs + Math.min(this.timeoutMs, 5_000);
    this.batchSize = opts.batchSize ?? 20;
    this.concurrency = opts.concurrency ?? 64;
    this.pollIntervalMs = opts.pollIntervalMs ?? 10_000;
    this.listen = opts.listen ?? true;
    this.sender = new DeliverySender(deps, this.timeoutMs, opts.ca);
    this.recorder = new AttemptRecorder(deps);
    this.onAttempt = opts.onAttempt;
  }

  /** Starts delivering in the background (the gateway process); tests may instead call runDue(). */
  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    if (this.listen) {
      try {
        this.unlisten = await listenForWakeups(this.deps.database, () => this.wake(), this.deps.log);
      } catch (err) {
        this.deps.log.warn({ err: (err as Error).message }, 'webhook wake-ups unavailable; delivering on the poll only');
      }
    }
    this.wake();
  }

  /** Deliveries may be due now (an event was written, a delivery replayed). */
  wake(): void {
    if (!this.running) return;
    if (this.loop) {
      this.rerun = true;
      return;
    }
    this.loop = this.drain()
      .catch((err: Error) => {
        this.deps.log.error({ err }, 'webhook delivery loop failed; retrying on the next wake-up');
        this.armTimer(this.deps.clock.now() + 1_000);
      })
      .finally(() => {
        this.loop = null;
        if (this.rerun && this.running) {
          this.rerun = false;
          this.wake();
        }
      });
  }

  /** Claims and sends until nothing is due or every slot is busy; then sleeps until the next due time (or the poll). */
  private async drain(): Promise<void> {
    do {
      this.rerun = false;
      this.slotsFull = false;
      while (this.running) {
        this.sendHandedOver();
        const free = this.concurrency - this.inflight.size;
        if (free <= 0) {
          this.slotsFull = true;
          return;
        }
        const want = Math.min(free, this.batchSize);
        const claimed = await this.claim(want);
        for (const row of claimed) this.track(this.attempt(row));
        if (claimed.length < want) break;
      }
    } while (this.rerun && this.running);
    if (this.running) this.armTimer(await nextDueMs(this.deps.db));
  }

  private track(attempt: Promise<AttemptOutcome | null>): void {
    const p = attempt.catch((err: Error) => {
      this.deps.log.error({ err }, 'webhook attempt failed unexpectedly; it is retried after its lease');
      return null;
    });
    const entry = this.inflight.add(p);
    void p.then((outcome) => {
      this.inflight.delete(entry);
      if (outcome) this.onAttempt?.(outcome);
      if (!this.running) return;
      if (this.handedOver.length > 0) this.sendHandedOver();
      if (this.slotsFull) this.wake();
      else if (outcome?.nextAttemptAt) this.armTimer(outcome.nextAttemptAt.getTime());
    });
  }

  /**
   * The outcome writer asks before writing a batch whose deliveries it could hand over: the lease to write them with,
   * or null (not running, or too many already waiting here) to write them unleased for any replica to claim.
   */
  handoffLeaseUntil(now: Date, count: number): Date | null {
    return handoffLease(this.running, this.handedOver.length, count, now, this.leaseMs);
  }

  /** Deliveries written leased to this worker (committed): sent as slots free up, before anything claimed. */
  deliverLeased(rows: readonly Claimed[]): void {
    // Not running any more (stopping): their lease runs out and a worker claims them then.
    if (!this.running) return;
    this.handedOver.push(...rows);
    this.sendHandedOver();
  }

  /**
   * A few attempts per turn of the event loop (each one's first step, signing and writing the request, runs at once):
   * a batch's deliveries started all together would hold up the requests being served for milliseconds.
   */
  private sendHandedOver(): void {
    let started = 0;
    while (this.handedOver.length > 0 && this.inflight.size < this.concurrency && this.running) {
      if (started === ATTEMPTS_PER_TURN) {
        if (!this.handoffScheduled) {
          this.handoffScheduled = true;
          setImmediate(() => {
            this.handoffScheduled = false;
            this.sendHandedOver();
          });
        }
        return;
      }
      this.track(this.attempt(this.handedOver.shift()!));
      started++;
    }
  }

  private armTimer(dueMs: number): void {
    const now = this.deps.clock.now();
    const at = Math.min(dueMs, now + this.pollIntervalMs);
    if (this.timer && at >= this.timerDue) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerDue = at;
    // A due time already past means rows another worker is claiming right now: look again shortly, not at once.
    this.timer = setTimeout(() => {
      this.timer = null;
      this.timerDue = Infinity;
      this.wake();
    }, Math.max(MIN_RECHECK_MS, at - now));
    this.timer.unref();
  }

  /**
   * Sends every delivery due at the clock's now and waits for the outcomes (tests, and `npm run` tooling): with a fake
   * clock, moving time and calling this walks the whole retry schedule in milliseconds.
   */
  async runDue(): Promise<AttemptOutcome[]> {
    const outcomes: AttemptOutcome[] = [];
    for (;;) {
      const claimed = await this.claim(this.batchSize);
      if (claimed.length === 0) return outcomes;
      const done = await Promise.all(claimed.map((row) => this.attempt(row)));
      for (const o of done) if (o) outcomes.push(o);
      for (const o of done) if (o) this.onAttempt?.(o);
    }
  }

  private claim(limit: number): Promise<Claimed[]> {
    return claimDeliveries(this.deps.db, new Date(this.deps.clock.now()), this.leaseMs, limit);
  }

  /** One HTTP attempt and its record; null only when the attempt could not be recorded (the lease then retries it). */
  private async attempt(row: Claimed): Promise<AttemptOutcome | null> {
    if (row.webhookStatus !== 'active') return this.recorder.abandon(row);
    const attemptedAt = new Date(this.deps.clock.now());
    // Spec 6.1.4 / §3: no attempt past the horizon, even one due before it that comes late (the gateway was down, or the
    // previous attempt ran into its timeout).
    const horizonMs = this.deps.config.webhookRetryHorizonS * 1000;
    if (row.firstAttemptAt && attemptedAt.getTime() >= new Date(row.firstAttemptAt).getTime() + horizonMs) {
      return this.recorder.expire(row, attemptedAt);
    }
    const result = await this.sender.send(row, attemptedAt);
    try {
      return await this.recorder.record(row, { attemptedAt, ...result });
    } catch (err) {
      this.deps.log.error({ err, delivery_id: row.id }, 'could not record a webhook attempt; it is retried after its lease');
      return null;
    }
  }

  /** Stops claiming, lets attempts in flight finish (each within its deadline), then releases connections. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      this.running = false;
      if (this.timer) clearTimeout(this.timer);
      this.timer = null;
      await this.loop;
      await Promise.allSettled(this.inflight.values());
      // Handed over but never sent: released, so any replica claims them now rather than when their lease runs out.
      const unsent = this.handedOver.splice(0).map((r) => r.id);
      if (unsent.length > 0) {
        // Due now: their next_attempt_at was the lease's end.
        const now = new Date(this.deps.clock.now());
        await releaseUnsent(this.deps.db, unsent, now).catch((err: Error) =>
          this.deps.log.warn({ err }, 'could not release handed-over webhook deliveries; they are claimed when their lease ends'),
        );
      }
      await this.unlisten?.().catch(() => {});
      this.unlisten = null;
      await this.sender.close();
    })();
    return this.stopping;
  }
}
