import type { Deps } from '../../deps.ts';
import type { IdempotencyStore } from '../../domain/idempotency/store.ts';
import { projectTemplates, type PromptSource, type VerticalPorts } from '../../domain/verticals/ports.ts';
import { runJob, type JobOutcome } from '../../domain/verticals/runner.ts';
import { claimDue } from '../../domain/verticals/store.ts';
import type { VerticalJob } from '../../generated/prisma/client.ts';
import { oncePorts } from '../model-calls.ts';
import { LeasedPool } from '../leased-pool.ts';

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
  private readonly ports: VerticalPorts;
  /** The claim-and-fill loop (jobs/leased-pool.ts): `batch` jobs leased per claim, run one after the other. */
  private readonly pool: LeasedPool<VerticalJob, JobOutcome>;

  constructor(
    private readonly deps: WorkerDeps,
    opts: VerticalWorkerOptions = {},
  ) {
    const leaseMs = opts.leaseMs ?? deps.config.verticalLeaseMs;
    this.ports = { ...oncePorts(deps, opts.idempotency), prompts: opts.prompts ?? projectTemplates };
    this.pool = new LeasedPool<VerticalJob, JobOutcome>(
      deps.log,
      {
        name: 'vertical work',
        idField: 'job_id',
        claim: (limit) => {
          const now = new Date(deps.clock.now());
          return claimDue(deps.db, now, new Date(now.getTime() + leaseMs), limit);
        },
        idOf: (job) => job.id,
        work: (job) => runJob(this.ports, deps, job),
      },
      { pollMs: opts.pollMs ?? 1_000, maxActive: 1, claimSize: opts.batch ?? 10 },
    );
  }

  /** Runs every job due now (on the injected clock) until none is left; returns the outcomes. */
  runDue(): Promise<JobOutcome[]> {
    return this.pool.runPending();
  }

  start(): void {
    this.pool.start();
  }

  /** Stops polling and waits for the job in hand (an unfinished one is resumed by the next start, after its lease). */
  stop(): Promise<void> {
    return this.pool.stop();
  }
}
