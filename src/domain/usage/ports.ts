import type { Tx } from '../../db/client.ts';
import type { LaggingReads } from '../../db/read-replica.ts';
import type { InferenceOutcome } from './outcome.ts';

/**
 * Where the inference service hands each finished request's outcome. The implementation (src/jobs/outcomes) writes
 * the usage records, their inference.completed events and the spend off the request path, in batches.
 */
export interface OutcomeSink {
  /** Accepts one outcome durably (a Redis stream entry or the in-process batch). Never throws: a write that fails everywhere is logged. */
  record(outcome: InferenceOutcome): Promise<void>;
}

/** Read-your-writes for what reads usage records or spend (budgets, usage lists, daily summaries, counter seeding). */
export interface OutcomeFlush {
  /**
   * Resolves once every outcome accepted by this process before the call is in PostgreSQL (by this replica or
   * another). With timeoutMs, gives up after it and resolves false.
   */
  flush(opts?: { timeoutMs?: number }): Promise<boolean>;
}

/** The outcome queue as the process runs it: the composition root closes it; tests hold it and read its figures. */
export interface OutcomeQueue extends OutcomeSink, OutcomeFlush {
  readonly kind: 'redis' | 'memory';
  /** Tests: hold the background writes (outcomes still accepted) until resume(). */
  pause(): void;
  resume(): void;
  stats(): OutcomeStats;
  /** SIGTERM: writes what is still queued here, then stops the background consumer. */
  close(): Promise<void>;
}

export interface OutcomeStats {
  accepted: number;
  /** Written by this process's batches. */
  persisted: number;
  batches: number;
  /** Written one by one on the request path because the fast path could not take them. */
  direct: number;
  /** Could be written nowhere (logged each). */
  lost: number;
  /** From acceptance to commit, over the last 2,000 outcomes this process wrote. */
  lagMs: Percentiles;
  /** One batch's transaction. */
  batchMs: Percentiles;
}

export interface Percentiles {
  p50: number;
  p99: number;
  max: number;
}

/**
 * What the usage service needs from outside the domain: read-your-writes before listing, and where a read that may
 * lag goes (the read replica of DATABASE_READ_URL once it has caught up, else the primary).
 */
export interface UsagePorts {
  outcomes: OutcomeFlush;
  reads: LaggingReads<Tx>;
}
