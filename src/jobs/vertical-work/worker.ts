import type { Deps } from '../../deps.ts';
import type { IdempotencyStore } from '../../domain/idempotency/store.ts';
import { projectTemplates, type PromptSource, type VerticalPorts } from '../../domain/verticals/ports.ts';
import { runDueJobs, type JobOutcome } from '../../domain/verticals/runner.ts';
import { oncePorts } from '../model-calls.ts';
import { yieldToEventLoop } from '../sweep.ts';

type WorkerDeps = Pick<Deps, 'db' | 'clock' | 'log' | 'limiter' | 'ports' | 'redis' | 'config' | 'webhooks' | 'outcomes'>;

export interface VerticalWorkerOptions {
  /** How long a claimed job is held; past it (a crash, a restart) another worker resumes it. Default SVC_VERTICAL_LEASE_MS (5 minutes). */
  leaseMs?: number;
  /** Polling interval (wall time). Default 1 s. */
  pollMs?: number;
  batch?: number;
  /** Where prompts come from before the built-in defaults (a project's templates, when that capability provides them). */
  prompts?: PromptSource;
  /** Where each job's model call is begun (default: the gateway's idempotency store). Tests inject faults through it. */
  idempotency?: IdempotencyStore;
}

/**
 * The background worker of the verticals' model work (CONTRACT §16): claims due jobs with a lease (so that a restart
 * resumes them and replicas never run one twice) and runs each through the inference pipeline as the key that asked
 * (domain/verticals/runner.ts), its model call made at most once (domain/inference/once.ts: a job resumed after a
 * crash replays the stored answer rather than pay again). Tests drive it with runDue(); main.ts starts it.
 */
export class VerticalWorker {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<unknown> | null = null;
  private readonly ports: VerticalPorts;
  private readonly opts: Required<Omit<VerticalWorkerOptions, 'prompts' | 'idempotency'>>;

  constructor(
    private readonly deps: WorkerDeps,
    opts: VerticalWorkerOptions = {},
  ) {
    this.opts = { leaseMs: opts.leaseMs ?? deps.config.verticalLeaseMs, pollMs: opts.pollMs ?? 1_000, batch: opts.batch ?? 10 };
    this.ports = { ...oncePorts(deps, opts.idempotency), prompts: opts.prompts ?? projectTemplates };
  }

  /** Runs every job due now (on the injected clock) until none is left; returns the outcomes. */
  async runDue(): Promise<JobOutcome[]> {
    const all: JobOutcome[] = [];
    for (;;) {
      const outcomes = await runDueJobs(this.ports, this.deps, { leaseMs: this.opts.leaseMs, batch: this.opts.batch });
      all.push(...outcomes);
      if (outcomes.length < this.opts.batch) return all;
      await yieldToEventLoop();
    }
  }

  start(): void {
    if (this.timer) return;
    const tick = () => {
      if (this.running) return;
      this.running = this.runDue()
        .catch((err: unknown) => this.deps.log.error({ err }, 'vertical work failed; retrying'))
        .finally(() => (this.running = null));
    };
    this.timer = setInterval(tick, this.opts.pollMs);
    this.timer.unref();
    tick();
  }

  /** Stops polling and waits for the job in hand (an unfinished one is resumed by the next start, after its lease). */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }
}
