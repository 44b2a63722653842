import type { InferenceOutcome } from '../../domain/usage/outcome.ts';
import type { OutcomeQueue } from '../../domain/usage/ports.ts';
import { BATCH_SIZE, OutcomeBatchWriter } from './batch-writer.ts';
import { encodeOutcome } from './codec.ts';

/** In-process queue bound: beyond it outcomes are written directly (slow, but nothing is dropped). */
export const MAX_BUFFERED = 20_000;

/** Without Redis: the bounded in-process batch. */
export class MemoryOutcomeWriter extends OutcomeBatchWriter implements OutcomeQueue {
  readonly kind = 'memory' as const;
  private readonly buffer: { o: InferenceOutcome; seq: number; at: number }[] = [];
  private seq = 0;
  private persistedSeq = 0;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private finished = false;
  private failures = 0;
  private retryAt = 0;

  async record(o: InferenceOutcome): Promise<void> {
    this.counts.accepted++;
    if (this.closed || this.buffer.length >= MAX_BUFFERED) {
      // Written in sequence order only matters for flush(): a direct write is complete when it returns.
      return this.direct(o);
    }
    this.buffer.push({ o, seq: ++this.seq, at: performance.now() });
    if (this.buffer.length >= (this.opts.batchSize ?? BATCH_SIZE)) this.schedule(0);
    else this.schedule(this.opts.flushMs);
  }

  async flush(opts: { timeoutMs?: number } = {}): Promise<boolean> {
    const target = this.seq;
    // Closed: nothing writes any more, so waiting could not end.
    if (this.finished) return this.buffer.length === 0;
    const deadline = opts.timeoutMs === undefined ? Infinity : performance.now() + opts.timeoutMs;
    while (this.persistedSeq < target && this.buffer.length > 0) {
      const left = deadline - performance.now();
      if (left <= 0) return false;
      const progressed = this.nextProgress(Math.min(left, 1_000));
      void this.drain();
      await progressed;
    }
    return true;
  }

  async close(): Promise<void> {
    if (this.finished) return;
    this.closed = true;
    this.resume();
    const done = await this.flush({ timeoutMs: 15_000 });
    this.finished = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (!done) {
      this.counts.lost += this.buffer.length;
      this.opts.log.error({ outcomes: this.buffer.length }, 'shutting down with usage records that PostgreSQL did not take: they are lost');
    }
  }

  protected override onResume(): void {
    this.schedule(0);
  }

  private schedule(delayMs: number): void {
    if (this.timer) {
      if (delayMs > 0) return;
      clearTimeout(this.timer);
    }
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.drain();
    }, delayMs);
    this.timer.unref();
  }

  /** Writes the buffer batch by batch; a failed batch stays at the front and is retried with backoff. */
  private drain(): Promise<void> {
    if (this.running) return this.running;
    if (this.paused || this.buffer.length === 0) return Promise.resolve();
    const wait = this.retryAt - performance.now();
    if (wait > 0) {
      this.schedule(Math.ceil(wait));
      return Promise.resolve();
    }
    this.running = (async () => {
      try {
        while (this.buffer.length > 0 && !this.paused) {
          const batch = this.buffer.slice(0, this.opts.batchSize ?? BATCH_SIZE);
          const { retry, poison, error } = await this.persistIsolating(batch.map((b) => b.o));
          for (const o of poison) {
            this.counts.lost++;
            this.opts.log.error({ err: error, outcome: encodeOutcome(o, this.opts.sealer) }, 'a usage record PostgreSQL refuses again and again was set aside');
          }
          const kept = new Set(retry);
          const done = batch.filter((b) => !kept.has(b.o));
          this.buffer.splice(0, batch.length, ...batch.filter((b) => kept.has(b.o)));
          const now = performance.now();
          for (const b of done) this.lag.add(Math.round(now - b.at));
          if (retry.length > 0) {
            this.failures++;
            this.retryAt = performance.now() + Math.min(5_000, 50 * 2 ** Math.min(this.failures, 7));
            this.opts.log.warn({ err: (error as Error).message, outcomes: this.buffer.length }, 'usage records not written yet; retrying');
            this.schedule(Math.ceil(this.retryAt - performance.now()));
            return;
          }
          this.failures = 0;
          this.persistedSeq = batch[batch.length - 1]!.seq;
          this.notifyProgress();
        }
      } finally {
        this.running = null;
        this.notifyProgress();
      }
    })();
    return this.running;
  }
}
