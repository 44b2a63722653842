import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { Agent, request } from 'undici';
import type { Config } from '../config/config.ts';
import type { Database, Db } from '../db/client.ts';
import { newId } from '../db/ids.ts';
import { recordSystemAudit } from '../domain/audit/service.ts';
import type { Clock } from '../domain/context.ts';
import { EgressPolicy } from './egress.ts';
import { eventEnvelopeJson } from './envelope.ts';
import { nextAttemptAt } from './retry-schedule.ts';
import type { SecretBox } from './secret-box.ts';
import { signatureHeader } from './signing.ts';
import { listenForWakeups } from './wakeups.ts';
import type { LeasedDelivery } from '../domain/events/outbox.ts';

export interface DeliveryWorkerDeps {
  config: Pick<Config, 'webhookRetryScheduleS' | 'webhookRetryHorizonS' | 'webhookTimeoutMs' | 'databaseUrl'>;
  db: Db;
  database: Database;
  clock: Clock;
  log: Logger;
  secretBox: SecretBox;
  egress: EgressPolicy;
}

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
}

export type AttemptOutcome = {
  deliveryId: string;
  webhookId: string;
  attempt: number;
  responseStatus: number | null;
  error: string | null;
  status: 'succeeded' | 'retrying' | 'failed';
  nextAttemptAt: Date | null;
};

/** A delivery this worker holds the lease of: claimed here, or handed over leased by the outcome writer. */
type Claimed = LeasedDelivery;

const RESPONSE_DRAIN_LIMIT = 64 * 1024;
const MAX_ERROR_LENGTH = 500;
const MIN_RECHECK_MS = 25;
/**
 * Handed-over deliveries waiting for a slot, at most: beyond it the writer leaves new deliveries unleased for any
 * replica to claim, so that none waits here until its lease runs out (which would let another worker send it too).
 */
const MAX_HANDED_OVER = 2_000;
/** Handed-over deliveries started per turn of the event loop (see sendHandedOver()). */
const ATTEMPTS_PER_TURN = 8;
/** Webhooks whose vetted url and opened secret are kept (see target()). */
const MAX_TARGETS = 1_000;
/** Succeeded attempts recorded by one statement, at most. */
const SUCCESS_BATCH = 500;

type SuccessResult = { attemptedAt: Date; responseStatus: number | null; durationMs: number };
interface PendingSuccess {
  row: Claimed;
  result: SuccessResult;
  resolve: (o: AttemptOutcome) => void;
  reject: (err: unknown) => void;
}

/**
 * Sends webhook deliveries: at least once, each attempt by one worker among all replicas.
 *
 * A claim is one statement: `SELECT … FOR UPDATE SKIP LOCKED` picks due rows no other worker is claiming, and the same
 * statement sets a lease, so a row claimed by one replica is invisible to the others until the attempt is recorded or
 * the lease expires (a crashed worker's attempt is then retried). Wakes on NOTIFY from the outbox (every replica, at
 * commit), on its own retries coming due, and on a slow poll. Tests drive it with `runDue()` and a fake clock.
 */
export class DeliveryWorker {
  readonly timeoutMs: number;
  readonly leaseMs: number;
  private readonly batchSize: number;
  private readonly concurrency: number;
  private readonly pollIntervalMs: number;
  private readonly listen: boolean;
  private readonly agent: Agent;

  private running = false;
  private loop: Promise<void> | null = null;
  private rerun = false;
  /** The last drain stopped because every slot was busy: a finishing attempt must drain again. */
  private slotsFull = false;
  private readonly inflight = new Set<Promise<unknown>>();
  private timer: NodeJS.Timeout | null = null;
  private timerDue = Infinity;
  private unlisten: (() => Promise<void>) | null = null;
  private stopping: Promise<void> | null = null;
  private readonly targets = new Map<string, { url: URL; secret: string }>();
  private handoffScheduled = false;
  /** Deliveries the outcome writer wrote leased to this worker, waiting for a slot. */
  private handedOver: Claimed[] = [];
  /** Succeeded attempts waiting to be recorded, all in one statement (group commit). */
  private successes: PendingSuccess[] = [];
  private recordingSuccesses = false;

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
    this.agent = new Agent({
      keepAliveTimeout: 30_000,
      // Per receiver origin: a receiver that answers in 5 ms takes ~6,000 deliveries/s over these.
      connections: 32,
      connect: {
        timeout: this.timeoutMs,
        // The address connected to is the one the egress policy vetted; TLS still verifies the url's hostname.
        lookup: deps.egress.lookup,
        ...(opts.ca ? { ca: opts.ca } : {}),
      },
    });
  }

  /** Starts delivering in the background (the gateway process); tests may instead call runDue(). */
  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    if (this.listen) {
      try {
        this.unlisten = await listenForWakeups(this.deps.database, this.deps.config.databaseUrl, () => this.wake(), this.deps.log);
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
    if (this.running) this.armTimer(await this.nextDueMs());
  }

  private track(attempt: Promise<AttemptOutcome | null>): void {
    const p = attempt.catch((err: Error) => {
      this.deps.log.error({ err }, 'webhook attempt failed unexpectedly; it is retried after its lease');
      return null;
    });
    this.inflight.add(p);
    void p.then((outcome) => {
      this.inflight.delete(p);
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
    if (!this.running || this.handedOver.length + count > MAX_HANDED_OVER) return null;
    return new Date(now.getTime() + this.leaseMs);
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

  /** The earliest time a pending or retrying delivery becomes claimable (its due time, or the end of its lease). */
  private async nextDueMs(): Promise<number> {
    const rows = await this.deps.db.$queryRaw<{ due: Date | null }[]>`
      SELECT min(GREATEST(d.next_attempt_at, COALESCE(d.lease_until, d.next_attempt_at))) AS due
      FROM webhook_deliveries d
      WHERE d.status IN ('pending', 'retrying') AND d.next_attempt_at IS NOT NULL`;
    const due = rows[0]?.due;
    return due ? new Date(due).getTime() : Infinity;
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
    }
  }

  private async claim(limit: number): Promise<Claimed[]> {
    const now = new Date(this.deps.clock.now());
    const leaseUntil = new Date(now.getTime() + this.leaseMs);
    return this.deps.db.$queryRaw<Claimed[]>`
      WITH due AS (
        SELECT d.id FROM webhook_deliveries d
        WHERE d.status IN ('pending', 'retrying')
          AND d.next_attempt_at <= ${now}
          AND (d.lease_until IS NULL OR d.lease_until <= ${now})
        ORDER BY d.next_attempt_at, d.id
        LIMIT ${limit}
        FOR UPDATE OF d SKIP LOCKED
      )
      UPDATE webhook_deliveries AS u SET lease_until = ${leaseUntil}
      FROM due, webhooks w, events e
      WHERE u.id = due.id AND w.id = u.webhook_id AND e.id = u.event_id
      RETURNING u.id, u.webhook_id AS "webhookId", w.status AS "webhookStatus", u.project_id AS "projectId", w.url,
        w.secret_encrypted AS "secretEncrypted", e.id AS "eventId", e.type, e.data::text AS "dataJson",
        e.created_at AS "eventCreatedAt", u.first_attempt_at AS "firstAttemptAt"`;
  }

  /**
   * The webhook's vetted url and opened signing secret, kept per webhook (keyed by its ciphertext and url too, so a
   * changed webhook is never served from an old entry): every delivery would otherwise decrypt the secret and parse
   * and vet the url again. The connect step vets hostnames on every connection; a literal address does no lookup, so it
   * is checked here, against the process's allowlist (which may have changed since the webhook was created).
   */
  private target(row: Claimed): { url: URL; secret: string } {
    const cacheKey = `${row.webhookId}\n${row.secretEncrypted}\n${row.url}`;
    const hit = this.targets.get(cacheKey);
    if (hit) return hit;
    const url = new URL(row.url);
    this.deps.egress.assertLiteralAllowed(url);
    const target = { url, secret: this.deps.secretBox.open(row.secretEncrypted, row.webhookId) };
    if (this.targets.size >= MAX_TARGETS) this.targets.clear();
    this.targets.set(cacheKey, target);
    return target;
  }

  /** One HTTP attempt and its record; null only when the attempt could not be recorded (the lease then retries it). */
  private async attempt(row: Claimed): Promise<AttemptOutcome | null> {
    if (row.webhookStatus !== 'active') return this.abandon(row);
    const attemptedAt = new Date(this.deps.clock.now());
    // Spec 6.1.4 / §3: no attempt past the horizon, even one due before it that comes late (the gateway was down, or the
    // previous attempt ran into its timeout).
    const horizonMs = this.deps.config.webhookRetryHorizonS * 1000;
    if (row.firstAttemptAt && attemptedAt.getTime() >= new Date(row.firstAttemptAt).getTime() + horizonMs) {
      return this.expire(row, attemptedAt);
    }
    const started = performance.now();
    let responseStatus: number | null = null;
    let error: string | null = null;
    try {
      const body = eventEnvelopeJson({
        id: row.eventId,
        type: row.type,
        createdAt: new Date(row.eventCreatedAt),
        projectId: row.projectId,
        data: JSON.parse(row.dataJson),
      });
      const { url, secret } = this.target(row);
      const res = await request(url, {
        method: 'POST',
        dispatcher: this.agent,
        headers: {
          'content-type': 'application/json',
          'user-agent': 'svc-webhooks/1',
          'x-svc-signature': signatureHeader(secret, body, Math.floor(attemptedAt.getTime() / 1000)),
          'x-svc-event': row.type,
          'x-svc-delivery-id': row.id,
          'x-svc-webhook-id': row.webhookId,
        },
        body,
        signal: AbortSignal.timeout(this.timeoutMs),
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      });
      responseStatus = res.statusCode;
      // Read (a bounded part of) the body so the keep-alive connection can be reused.
      await res.body.dump({ limit: RESPONSE_DRAIN_LIMIT }).catch(() => {});
      if (responseStatus >= 300 && responseStatus < 400) error = 'redirect not followed';
      else if (responseStatus < 200 || responseStatus >= 300) error = `receiver answered ${responseStatus}`;
    } catch (err) {
      error = describeError(err, performance.now() - started >= this.timeoutMs - 5);
    }
    const durationMs = Math.max(0, Math.round(performance.now() - started));
    try {
      return await this.record(row, { attemptedAt, responseStatus, durationMs, error });
    } catch (err) {
      this.deps.log.error({ err, delivery_id: row.id }, 'could not record a webhook attempt; it is retried after its lease');
      return null;
    }
  }

  private async record(
    row: Claimed,
    result: { attemptedAt: Date; responseStatus: number | null; durationMs: number; error: string | null },
  ): Promise<AttemptOutcome> {
    const { webhookRetryScheduleS: schedule, webhookRetryHorizonS: horizonS } = this.deps.config;
    const succeeded = result.error === null;
    if (succeeded) return this.recordSuccess(row, result);
    return this.deps.db.$transaction(async (tx) => {
      // Locks the row: a concurrent disable (which marks pending retries failed) is ordered before or after this.
      const [current] = await tx.$queryRaw<{ status: string; attempts: number; firstAttemptAt: Date | null }[]>`
        SELECT status, attempts, first_attempt_at AS "firstAttemptAt" FROM webhook_deliveries WHERE id = ${row.id} FOR UPDATE`;
      const webhook = await tx.webhook.findUnique({ where: { id: row.webhookId }, select: { status: true } });
      const attempt = (current?.attempts ?? 0) + 1;
      const firstAttemptAt = current?.firstAttemptAt ? new Date(current.firstAttemptAt) : result.attemptedAt;
      await tx.webhookAttempt.create({
        data: {
          id: newId('att', result.attemptedAt.getTime()),
          deliveryId: row.id,
          attempt,
          attemptedAt: result.attemptedAt,
          responseStatus: result.responseStatus,
          durationMs: result.durationMs,
          error: result.error,
        },
      });
      let status: AttemptOutcome['status'];
      let next: Date | null = null;
      if (current && current.status !== 'pending' && current.status !== 'retrying') {
        // Finished meanwhile (the webhook was disabled): the attempt is recorded, the outcome stays.
        status = current.status as AttemptOutcome['status'];
      } else if (succeeded) {
        status = 'succeeded';
      } else if (webhook?.status !== 'active') {
        status = 'failed';
      } else {
        next = nextAttemptAt(firstAttemptAt, attempt, schedule, horizonS, result.attemptedAt);
        status = next ? 'retrying' : 'failed';
      }
      await tx.webhookDelivery.update({
        where: { id: row.id },
        data: {
          attempts: attempt,
          firstAttemptAt,
          lastAttemptAt: result.attemptedAt,
          responseStatus: result.responseStatus,
          status,
          nextAttemptAt: next,
          leaseUntil: null,
        },
      });
      if (status === 'failed' && webhook?.status === 'active' && current?.status !== 'failed') {
        await auditDeliveryFailed(tx, row, result.attemptedAt, { attempts: attempt, responseStatus: result.responseStatus, error: result.error });
      }
      return { deliveryId: row.id, webhookId: row.webhookId, attempt, responseStatus: result.responseStatus, error: result.error, status, nextAttemptAt: next };
    });
  }

  /** A retry that came due before the horizon but is claimed past it: failed without an attempt, audited as usual. */
  private async expire(row: Claimed, now: Date): Promise<AttemptOutcome> {
    return this.deps.db.$transaction(async (tx) => {
      const [current] = await tx.$queryRaw<{ status: string; attempts: number; responseStatus: number | null }[]>`
        SELECT status, attempts, response_status AS "responseStatus" FROM webhook_deliveries WHERE id = ${row.id} FOR UPDATE`;
      const open = current?.status === 'pending' || current?.status === 'retrying';
      if (open) {
        await tx.webhookDelivery.update({ where: { id: row.id }, data: { status: 'failed', nextAttemptAt: null, leaseUntil: null } });
        const last = await tx.webhookAttempt.findFirst({ where: { deliveryId: row.id }, orderBy: { attempt: 'desc' }, select: { error: true } });
        await auditDeliveryFailed(tx, row, now, { attempts: current.attempts, responseStatus: current.responseStatus, error: last?.error ?? null });
      }
      return {
        deliveryId: row.id,
        webhookId: row.webhookId,
        attempt: current?.attempts ?? 0,
        responseStatus: current?.responseStatus ?? null,
        error: 'retry horizon passed',
        status: open ? 'failed' : ((current?.status ?? 'failed') as AttemptOutcome['status']),
        nextAttemptAt: null,
      };
    });
  }

  /**
   * A delivery written for a webhook that was being disabled at the same moment (the outbox read it as active): it is
   * failed without an attempt, like the disabled webhook's other open deliveries.
   */
  private async abandon(row: Claimed): Promise<AttemptOutcome> {
    await this.deps.db.webhookDelivery.updateMany({
      where: { id: row.id, status: { in: ['pending', 'retrying'] } },
      data: { status: 'failed', nextAttemptAt: null, leaseUntil: null },
    });
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

  private async writeSuccesses(batch: readonly PendingSuccess[]): Promise<Map<string, { attempt: number; status: AttemptOutcome['status'] }>> {
    const rows = batch.map(({ row, result }) => ({
      id: row.id,
      attempt_id: newId('att', result.attemptedAt.getTime()),
      at: result.attemptedAt.toISOString(),
      response_status: result.responseStatus,
      duration_ms: result.durationMs,
    }));
    const [out] = await this.deps.db.$queryRaw<{ done: [string, number, AttemptOutcome['status']][] | string | null }[]>`
      WITH x AS (
        SELECT * FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
          AS x(id text, attempt_id text, at timestamptz, response_status int, duration_ms int)
      ), d AS (
        UPDATE webhook_deliveries AS w SET
          attempts = w.attempts + 1,
          first_attempt_at = COALESCE(w.first_attempt_at, x.at),
          last_attempt_at = x.at,
          response_status = x.response_status,
          status = CASE WHEN w.status IN ('pending', 'retrying') THEN 'succeeded' ELSE w.status END,
          next_attempt_at = NULL,
          lease_until = NULL
        FROM x WHERE w.id = x.id
        RETURNING w.id, w.attempts, w.status
      ), a AS (
        INSERT INTO webhook_attempts (id, delivery_id, attempt, attempted_at, response_status, duration_ms, error)
        SELECT x.attempt_id, d.id, d.attempts, x.at, x.response_status, x.duration_ms, NULL FROM d JOIN x ON x.id = d.id
        RETURNING 1
      )
      SELECT (SELECT json_agg(json_build_array(d.id, d.attempts, d.status)) FROM d) AS done, (SELECT count(*) FROM a) AS n`;
    const done = typeof out?.done === 'string' ? (JSON.parse(out.done) as [string, number, AttemptOutcome['status']][]) : (out?.done ?? []);
    return new Map(done.map(([id, attempt, status]) => [id, { attempt: Number(attempt), status }]));
  }

  /** Stops claiming, lets attempts in flight finish (each within its deadline), then releases connections. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      this.running = false;
      if (this.timer) clearTimeout(this.timer);
      this.timer = null;
      await this.loop;
      await Promise.allSettled([...this.inflight]);
      // Handed over but never sent: released, so any replica claims them now rather than when their lease runs out.
      const unsent = this.handedOver.splice(0).map((r) => r.id);
      if (unsent.length > 0) {
        // Due now: their next_attempt_at was the lease's end.
        const now = new Date(this.deps.clock.now());
        await this.deps.db.$executeRaw`UPDATE webhook_deliveries SET lease_until = NULL, next_attempt_at = ${now}
          WHERE id = ANY(${unsent}::text[]) AND attempts = 0 AND status = 'pending'`
          .catch((err: Error) => this.deps.log.warn({ err }, 'could not release handed-over webhook deliveries; they are claimed when their lease ends'));
      }
      await this.unlisten?.().catch(() => {});
      this.unlisten = null;
      await this.agent.close().catch(() => {});
    })();
    return this.stopping;
  }
}

function successOutcome(s: PendingSuccess, done: { attempt: number; status: AttemptOutcome['status'] } | undefined): AttemptOutcome {
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

function describeError(err: unknown, timedOut: boolean): string {
  const e = err as { name?: string; code?: string; message?: string; cause?: { code?: string; message?: string } };
  const code = e?.code ?? e?.cause?.code;
  let text: string;
  if (timedOut || e?.name === 'TimeoutError' || e?.name === 'AbortError' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') {
    text = 'timeout: no response within the deadline';
  } else if (e?.name === 'EgressRefused' || code === 'EGRESS_REFUSED') {
    text = `egress refused: ${e.message ?? e.cause?.message}`;
  } else if (code === 'ECONNREFUSED') {
    text = 'connection refused';
  } else {
    text = `${code ? `${code}: ` : ''}${e?.message ?? String(err)}`;
  }
  return text.slice(0, MAX_ERROR_LENGTH);
}

/** Audit `webhook.delivery.failed` (spec §3): the delivery's schedule ended without success. */
function auditDeliveryFailed(
  tx: Parameters<typeof recordSystemAudit>[0],
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
