import type { Tx } from '../../db/client.ts';
import type { Deps } from '../../deps.ts';
import { newId } from '../../db/ids.ts';
import { recordSystemAudit } from '../../domain/audit/service.ts';
import { nextAttemptAt } from '../../domain/webhooks/retry-schedule.ts';
import type { Claimed } from './claim.ts';
import type { SendResult } from './send.ts';
import {
  failIfOpen,
  insertAttempt,
  lastAttemptError,
  lockForAttempt,
  lockForExpiry,
  markFailed,
  recordSucceeded,
  updateAfterAttempt,
  webhookStatusOf,
  type AttemptStatus,
} from './store.ts';

export type AttemptOutcome = {
  deliveryId: string;
  webhookId: string;
  attempt: number;
  responseStatus: number | null;
  error: string | null;
  status: AttemptStatus;
  nextAttemptAt: Date | null;
};

/** Succeeded attempts recorded by one statement, at most. */
const SUCCESS_BATCH = 500;

type SuccessResult = { attemptedAt: Date; responseStatus: number | null; durationMs: number };
interface PendingSuccess {
  row: Claimed;
  result: SuccessResult;
  resolve: (o: AttemptOutcome) => void;
  reject: (err: unknown) => void;
}

/** Read from config: webhookRetryScheduleS, webhookRetryHorizonS. The successes' group commit runs on database.sql. */
export type AttemptRecorderDeps = Pick<Deps, 'config' | 'db' | 'database'>;

/**
 * Records what became of each attempt: the attempt row, the delivery's next state from the retry schedule, and the
 * `webhook.delivery.failed` audit entry when its schedule ends without success. Also the deliveries finished without
 * an attempt (past the horizon, or their webhook disabled).
 */
export class AttemptRecorder {
  /** Succeeded attempts waiting to be recorded, all in one statement (group commit). */
  private successes: PendingSuccess[] = [];
  private recordingSuccesses = false;

  constructor(private readonly deps: AttemptRecorderDeps) {}

  async record(row: Claimed, result: SendResult & { attemptedAt: Date }): Promise<AttemptOutcome> {
    const { webhookRetryScheduleS: schedule, webhookRetryHorizonS: horizonS } = this.deps.config;
    const succeeded = result.error === null;
    if (succeeded) return this.recordSuccess(row, result);
    return this.deps.db.$transaction(async (tx) => {
      // Locks the row: a concurrent disable (which marks pending retries failed) is ordered before or after this.
      const current = await lockForAttempt(tx, row.id);
      const webhookStatus = await webhookStatusOf(tx, row.webhookId);
      const attempt = (current?.attempts ?? 0) + 1;
      const firstAttemptAt = current?.firstAttemptAt ? new Date(current.firstAttemptAt) : result.attemptedAt;
      await insertAttempt(tx, {
        id: newId('att', result.attemptedAt.getTime()),
        deliveryId: row.id,
        attempt,
        attemptedAt: result.attemptedAt,
        responseStatus: result.responseStatus,
        durationMs: result.durationMs,
        error: result.error,
      });
      let status: AttemptStatus;
      let next: Date | null = null;
      if (current && current.status !== 'pending' && current.status !== 'retrying') {
        // Finished meanwhile (the webhook was disabled): the attempt is recorded, the outcome stays.
        status = current.status as AttemptStatus;
      } else if (succeeded) {
        status = 'succeeded';
      } else if (webhookStatus !== 'active') {
        status = 'failed';
      } else {
        next = nextAttemptAt(firstAttemptAt, attempt, schedule, horizonS, result.attemptedAt);
        status = next ? 'retrying' : 'failed';
      }
      await updateAfterAttempt(tx, row.id, {
        attempts: attempt,
        firstAttemptAt,
        lastAttemptAt: result.attemptedAt,
        responseStatus: result.responseStatus,
        status,
        nextAttemptAt: next,
      });
      if (status === 'failed' && webhookStatus === 'active' && current?.status !== 'failed') {
        await auditDeliveryFailed(tx, row, result.attemptedAt, { attempts: attempt, responseStatus: result.responseStatus, error: result.error });
      }
      return { deliveryId: row.id, webhookId: row.webhookId, attempt, responseStatus: result.responseStatus, error: result.error, status, nextAttemptAt: next };
    });
  }

  /** A retry that came due before the horizon but is claimed past it: failed without an attempt, audited as usual. */
  async expire(row: Claimed, now: Date): Promise<AttemptOutcome> {
    return this.deps.db.$transaction(async (tx) => {
      const current = await lockForExpiry(tx, row.id);
      const open = current?.status === 'pending' || current?.status === 'retrying';
      if (open) {
        await markFailed(tx, row.id);
        const error = await lastAttemptError(tx, row.id);
        await auditDeliveryFailed(tx, row, now, { attempts: current.attempts, responseStatus: current.responseStatus, error: error ?? null });
      }
      return {
        deliveryId: row.id,
        webhookId: row.webhookId,
        attempt: current?.attempts ?? 0,
        responseStatus: current?.responseStatus ?? null,
        error: 'retry horizon passed',
        status: open ? 'failed' : ((current?.status ?? 'failed') as AttemptStatus),
        nextAttemptAt: null,
      };
    });
  }

  /**
   * A delivery written for a webhook that was being disabled at the same moment (the outbox read it as active): it is
   * failed without an attempt, like the disabled webhook's other open deliveries.
   */
  async abandon(row: Claimed): Promise<AttemptOutcome> {
    await failIfOpen(this.deps.db, row.id);
    return {
      deliveryId: row.id,
      webhookId: row.webhookId,
      attempt: 0,
      responseStatus: null,
      error: 'webhook disabled',
      status: 'failed',
      nextAttemptAt: null,
    };
  }

  /**
   * The common case, recorded in batches: every attempt that succeeded while the previous batch was being written goes
   * into the next ONE statement (the attempt rows and the deliveries' new state), so a steady stream of deliveries costs
   * PostgreSQL one commit per batch, not one per delivery. A delivery finished meanwhile (its webhook disabled) keeps its
   * status; the attempt is still recorded.
   */
  private recordSuccess(row: Claimed, result: SuccessResult): Promise<AttemptOutcome> {
    return new Promise((resolve, reject) => {
      this.successes.push({ row, result, resolve, reject });
      // setImmediate: the attempts finishing in the same turn of the event loop share the first statement too.
      if (!this.recordingSuccesses) {
        this.recordingSuccesses = true;
        setImmediate(() => void this.recordSuccesses());
      }
    });
  }

  private async recordSuccesses(): Promise<void> {
    try {
      while (this.successes.length > 0) {
        // One row per delivery in a statement (a delivery attempted twice at once, after a lease ran out, waits a turn).
        const batch: PendingSuccess[] = [];
        const later: PendingSuccess[] = [];
        const ids = new Set<string>();
        for (const s of this.successes) {
          if (batch.length < SUCCESS_BATCH && !ids.has(s.row.id)) {
            ids.add(s.row.id);
            batch.push(s);
          } else later.push(s);
        }
        this.successes = later;
        try {
          const done = await this.writeSuccesses(batch);
          for (const s of batch) s.resolve(successOutcome(s, done.get(s.row.id)));
        } catch {
          // One at a time (a deadlock with a concurrent disable, say, fails only its own row); each error goes to its attempt.
          for (const s of batch) {
            try {
              s.resolve(successOutcome(s, (await this.writeSuccesses([s])).get(s.row.id)));
            } catch (err) {
              s.reject(err);
            }
          }
        }
      }
    } finally {
      this.recordingSuccesses = false;
    }
  }

  private writeSuccesses(batch: readonly PendingSuccess[]): Promise<Map<string, { attempt: number; status: AttemptStatus }>> {
    return recordSucceeded(
      this.deps.database.sql,
      batch.map(({ row, result }) => ({
        id: row.id,
        attempt_id: newId('att', result.attemptedAt.getTime()),
        at: result.attemptedAt.toISOString(),
        response_status: result.responseStatus,
        duration_ms: result.durationMs,
      })),
    );
  }
}

function successOutcome(s: PendingSuccess, done: { attempt: number; status: AttemptStatus } | undefined): AttemptOutcome {
  return {
    deliveryId: s.row.id,
    webhookId: s.row.webhookId,
    attempt: done?.attempt ?? 0,
    responseStatus: s.result.responseStatus,
    error: null,
    status: done?.status ?? 'succeeded',
    nextAttemptAt: null,
  };
}

/** Audit `webhook.delivery.failed` (spec §3): the delivery's schedule ended without success. */
function auditDeliveryFailed(
  tx: Tx,
  row: Claimed,
  at: Date,
  last: { attempts: number; responseStatus: number | null; error: string | null },
): Promise<unknown> {
  return recordSystemAudit(tx, at, 'webhook.delivery.failed', {
    projectId: row.projectId,
    targetId: row.id,
    data: {
      webhook_id: row.webhookId,
      delivery_id: row.id,
      event_id: row.eventId,
      event_type: row.type,
      attempts: last.attempts,
      last_response_status: last.responseStatus,
      last_error: last.error,
    },
  });
}
