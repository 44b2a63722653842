import type { Logger } from 'pino';
import type { SqlDriver } from '../../db/sql.ts';
import type { BudgetAlertSender } from '../../domain/budgets/ports.ts';
import type { Clock } from '../../domain/context.ts';
import type { DeliveryHandoff } from '../../domain/events/ports.ts';
import type { ContentSealer } from '../../domain/privacy/ports.ts';
import type { InferenceOutcome } from '../../domain/usage/outcome.ts';
import type { OutcomeStats } from '../../domain/usage/ports.ts';
import { SampleWindow } from './percentiles.ts';
import { persistOutcomes } from './persist-outcomes.ts';
import { databaseAnswers } from './store.ts';

export const BATCH_SIZE = 200;
/** An outcome that failed alone this many times while the database answered is set aside (logged, dead-lettered). */
const POISON_AFTER = 3;

export interface OutcomeWriterOptions {
  /** The batches' transactions, on the driver under Prisma (db/sql.ts). */
  sql: SqlDriver;
  /** Seals the retained content where it is written (the rows, the usage stream's entries, dead letters, logs). */
  sealer: ContentSealer;
  clock: Clock;
  log: Logger;
  /** This process's delivery worker: a batch's inference.completed deliveries are written leased to it. */
  handoff: DeliveryHandoff;
  /** For the budget alert e-mails that a batch fires. */
  alerts: BudgetAlertSender;
  /** Without Redis: how often the in-process batch is written (the crash-loss window). */
  flushMs: number;
  /** With Redis: at most one batch read from the stream per interval (default STREAM_MS). */
  streamMs?: number;
  batchSize?: number;
}

/**
 * What both queues share: one batch in one transaction, the poison isolation, the direct fallback, the figures, and
 * pause/resume and the progress that flush() waits on.
 */
export abstract class OutcomeBatchWriter {
  protected readonly counts = { accepted: 0, persisted: 0, batches: 0, direct: 0, lost: 0 };
  protected readonly lag = new SampleWindow();
  protected readonly batchTime = new SampleWindow();
  protected paused = false;
  protected closed = false;
  private progress: (() => void)[] = [];
  private resumed: (() => void)[] = [];

  constructor(protected readonly opts: OutcomeWriterOptions) {}

  stats(): OutcomeStats {
    return { ...this.counts, lagMs: this.lag.summary(), batchMs: this.batchTime.summary() };
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    for (const r of this.resumed.splice(0)) r();
    this.onResume();
  }

  protected onResume(): void {}

  protected whenResumed(): Promise<void> {
    return this.paused ? new Promise((r) => this.resumed.push(r)) : Promise.resolve();
  }

  /** One batch in one transaction; e-mails for the alerts it fired once committed. */
  protected async persist(batch: InferenceOutcome[]): Promise<void> {
    const started = performance.now();
    const now = new Date(this.opts.clock.now());
    // The inference.completed deliveries go straight to this process's delivery worker, leased, when it runs.
    const { handoff } = this.opts;
    const leaseUntil = handoff.handoffLeaseUntil(now, batch.length) ?? undefined;
    const { alerts, leased } = await persistOutcomes(this.opts, batch, now, { leaseUntil });
    if (leased.length > 0) handoff.deliverLeased(leased);
    this.batchTime.add(Math.round((performance.now() - started) * 10) / 10);
    this.counts.batches++;
    this.counts.persisted += batch.length;
    if (alerts.length > 0) this.opts.alerts.send(alerts);
  }

  /**
   * Writes a batch; if its transaction fails while the database answers, each outcome alone, so that one outcome that
   * cannot be written (a poison entry) does not hold the others back. Returns those not written: `poison` are the ones
   * that failed alone POISON_AFTER times in a row with the database answering (retrying will not help).
   */
  protected async persistIsolating(batch: InferenceOutcome[]): Promise<{ retry: InferenceOutcome[]; poison: InferenceOutcome[]; error?: unknown }> {
    try {
      await this.persist(batch);
      return { retry: [], poison: [] };
    } catch (err) {
      if (!(await databaseAnswers(this.opts.sql, 1_000))) return { retry: batch, poison: [], error: err };
      const retry: InferenceOutcome[] = [];
      const poison: InferenceOutcome[] = [];
      let error: unknown = err;
      for (const o of batch) {
        try {
          await this.persist([o]);
          this.strikes.delete(o.requestId);
        } catch (e) {
          error = e;
          const strikes = (this.strikes.get(o.requestId) ?? 0) + 1;
          if (strikes >= POISON_AFTER) {
            this.strikes.delete(o.requestId);
            poison.push(o);
          } else {
            if (this.strikes.size < 10_000) this.strikes.set(o.requestId, strikes);
            retry.push(o);
          }
        }
      }
      return { retry, poison, error };
    }
  }

  private readonly strikes = new Map<string, number>();

  /** The fallback: this outcome alone, now, on the request path. */
  protected async direct(o: InferenceOutcome): Promise<void> {
    try {
      const { alerts } = await persistOutcomes(this.opts, [o], new Date(this.opts.clock.now()));
      this.counts.direct++;
      if (alerts.length > 0) this.opts.alerts.send(alerts);
    } catch (err) {
      this.counts.lost++;
      this.opts.log.error({ err, requestId: o.requestId }, 'could not write the usage record');
    }
  }

  /** Wakes flush() waiters after each batch attempt. */
  protected notifyProgress(): void {
    for (const p of this.progress.splice(0)) p();
  }

  protected nextProgress(maxWaitMs: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, Math.max(1, maxWaitMs));
      timer.unref();
      this.progress.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}
