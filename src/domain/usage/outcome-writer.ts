import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Db } from '../../db/client.ts';
import { redisHealthOf, withRedisTimeout } from '../../limits/redis-health.ts';
import { sendBudgetAlerts } from '../budgets/service.ts';
import type { Clock, Deps } from '../context.ts';
import { decodeOutcome, encodeOutcome, persistOutcomes, type InferenceOutcome } from './record.ts';

/**
 * Usage records and inference.completed events, written off the request path in batches, durably.
 *
 * With Redis (RedisOutcomeWriter): the request path appends the outcome to a Redis stream (XADD, issued together with
 * the limiter's settle command so that both share one round trip) and answers once Redis has it: that is the
 * write-ahead log. A background consumer per replica (its own connection, consumer group `writers`) reads batches
 * (XREADGROUP COUNT/BLOCK), writes each in ONE PostgreSQL transaction (persistOutcomes: idempotent, so an entry read
 * twice is written once), then XACK + XDEL. Entries a dead replica had read but not written are taken over by the others
 * (XAUTOCLAIM) once idle for the lease. A crash loses nothing Redis acknowledged.
 *
 * Without Redis (MemoryOutcomeWriter): a bounded in-process batch, flushed every SVC_OUTCOME_FLUSH_MS (20 ms) or at
 * BATCH_SIZE outcomes. SIGTERM flushes it; a crash (kill -9, power loss) loses what was accepted since the last
 * commit: at most one flush interval of outcomes plus the batch being written (more while PostgreSQL is unreachable,
 * up to MAX_BUFFERED), which is the documented worst case.
 *
 * Either way, when the fast path cannot take an outcome (Redis down, buffer full) it is written directly in its own
 * transaction, on the request path, so that nothing is dropped for lack of a queue.
 */
export interface OutcomeWriter {
  readonly kind: 'redis' | 'memory';
  /** Accepts one outcome durably (see above). Never throws: a write that fails everywhere is logged. */
  record(outcome: InferenceOutcome): Promise<void>;
  /**
   * Resolves once every outcome accepted by this process before the call is in PostgreSQL (by this replica or
   * another). With timeoutMs, gives up after it and resolves false.
   */
  flush(opts?: { timeoutMs?: number }): Promise<boolean>;
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

export const BATCH_SIZE = 200;
/** An outcome that failed alone this many times while the database answered is set aside (logged, dead-lettered). */
const POISON_AFTER = 3;
/** In-process queue bound: beyond it outcomes are written directly (slow, but nothing is dropped). */
export const MAX_BUFFERED = 20_000;
const BLOCK_MS = 2_000;
const COMMAND_TIMEOUT_MS = 2_000;
/**
 * An XADD is sub-millisecond; one that has not answered by then (Redis dying, a full pipeline behind a dead socket) is
 * written directly instead, well inside the routing timeout. Should it land after all, it is written once anyway.
 */
const APPEND_TIMEOUT_MS = 500;
const GROUP = 'writers';

export interface OutcomeWriterOptions {
  db: Db;
  clock: Clock;
  log: Logger;
  /** For the budget alert e-mails that a batch fires. */
  deps: () => Deps;
  flushMs: number;
  batchSize?: number;
}

/** Samples of the last N values, for percentiles. */
class Window {
  private readonly values: number[] = [];
  private next = 0;
  constructor(private readonly size = 2_000) {}
  add(v: number): void {
    if (this.values.length < this.size) this.values.push(v);
    else this.values[this.next++ % this.size] = v;
  }
  summary(): Percentiles {
    if (this.values.length === 0) return { p50: 0, p99: 0, max: 0 };
    const s = [...this.values].sort((a, b) => a - b);
    const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
    return { p50: at(0.5), p99: at(0.99), max: s[s.length - 1]! };
  }
}

abstract class BaseWriter {
  protected readonly counts = { accepted: 0, persisted: 0, batches: 0, direct: 0, lost: 0 };
  protected readonly lag = new Window();
  protected readonly batchTime = new Window();
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
    const worker = this.opts.deps().webhooks.worker;
    const leaseUntil = worker.handoffLeaseUntil(now, batch.length) ?? undefined;
    const { alerts, leased } = await persistOutcomes(this.opts.db, batch, now, { leaseUntil });
    if (leased.length > 0) worker.deliverLeased(leased);
    this.batchTime.add(Math.round((performance.now() - started) * 10) / 10);
    this.counts.batches++;
    this.counts.persisted += batch.length;
    if (alerts.length > 0) sendBudgetAlerts(this.opts.deps(), alerts);
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
      if (!(await this.databaseAnswers())) return { retry: batch, poison: [], error: err };
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

  private async databaseAnswers(): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        this.opts.db.$queryRaw`SELECT 1`.then(() => true),
        new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), 1_000))),
      ]);
    } catch {
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  /** The fallback: this outcome alone, now, on the request path. */
  protected async direct(o: InferenceOutcome): Promise<void> {
    try {
      const { alerts } = await persistOutcomes(this.opts.db, [o], new Date(this.opts.clock.now()));
      this.counts.direct++;
      if (alerts.length > 0) sendBudgetAlerts(this.opts.deps(), alerts);
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

/** Without Redis: the bounded in-process batch. */
export class MemoryOutcomeWriter extends BaseWriter implements OutcomeWriter {
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
            this.opts.log.error({ err: error, outcome: encodeOutcome(o) }, 'a usage record PostgreSQL refuses again and again was set aside');
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

/** "<ms>-<seq>" stream ids compared as numbers. */
function idCompare(a: string, b: string): number {
  const [am, as] = a.split('-').map(BigInt) as [bigint, bigint];
  const [bm, bs] = b.split('-').map(BigInt) as [bigint, bigint];
  return am === bm ? (as === bs ? 0 : as < bs ? -1 : 1) : am < bm ? -1 : 1;
}

type StreamEntry = [id: string, fields: string[] | null];
type ReadGroup = { xreadgroup(...args: (string | number)[]): Promise<unknown> };

/** With Redis: the stream write-ahead log and its consumer. */
export class RedisOutcomeWriter extends BaseWriter implements OutcomeWriter {
  readonly kind = 'redis' as const;
  readonly stream: string;
  readonly consumer = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private readonly conn: Redis;
  private loop: Promise<void> | null = null;
  /** CLIENT ID of the consumer connection, to wake its blocked XREADGROUP (pause, close). */
  private connId: number | null = null;
  private stopped = false;
  private reclaimTimer: NodeJS.Timeout | null = null;
  private reclaiming = false;
  /** The newest entry this process appended, and the newest one flush() saw written. */
  private lastId: string | null = null;
  private flushedUpTo: string | null = null;
  private warnedFallback = false;

  constructor(
    opts: OutcomeWriterOptions,
    private readonly redis: Redis,
    prefix: string,
    private readonly leaseMs: number,
  ) {
    super(opts);
    this.stream = `${prefix}usage:outcomes`;
    // Its own connection: XREADGROUP BLOCK would hold up every other command on a shared one.
    // Lazy: connects with the consumer's first command (start()); a process that only appends never opens it.
    this.conn = redis.duplicate({ maxRetriesPerRequest: null, lazyConnect: true, enableAutoPipelining: false, commandTimeout: undefined });
    this.conn.on('error', (err: Error) => opts.log.debug({ err: err.message }, 'outcome consumer connection error'));
    this.conn.on('ready', () => {
      this.conn.client('ID').then(
        (id) => (this.connId = Number(id)),
        () => {},
      );
    });
  }

  start(): void {
    if (this.loop) return;
    this.loop = this.run();
    const every = Math.max(200, Math.min(2_000, Math.floor(this.leaseMs / 2)));
    this.reclaimTimer = setInterval(() => void this.reclaim(), every);
    this.reclaimTimer.unref();
  }

  async record(o: InferenceOutcome): Promise<void> {
    this.counts.accepted++;
    // Redis reconnecting or not answering (limits/redis-health.ts): queueing the entry would hold the request; write it directly.
    const redisHealth = redisHealthOf(this.redis);
    if (this.closed || !redisHealth.usable) return this.direct(o);
    try {
      const id = await withRedisTimeout(redisHealth.watch(this.redis.xadd(this.stream, '*', 'o', encodeOutcome(o))), APPEND_TIMEOUT_MS);
      if (id) this.lastId = id;
      this.warnedFallback = false;
    } catch (err) {
      if (!this.warnedFallback) {
        this.warnedFallback = true;
        this.opts.log.warn({ err: (err as Error).message }, 'the usage stream refused an entry: writing usage records directly to PostgreSQL');
      }
      // If the XADD did land after all, the consumer skips it: persistOutcomes writes each request once.
      await this.direct(o);
    }
  }

  async flush(opts: { timeoutMs?: number } = {}): Promise<boolean> {
    const target = this.lastId;
    if (target === null || (this.flushedUpTo !== null && idCompare(this.flushedUpTo, target) >= 0)) return true;
    // Closed: this consumer writes no more; another replica may still have written them.
    if (this.stopped) return this.writtenUpTo(target);
    const deadline = opts.timeoutMs === undefined ? Infinity : performance.now() + opts.timeoutMs;
    for (;;) {
      // Redis not answering: the stream cannot be asked, and waiting for it would hold the caller (a budget read).
      if (!redisHealthOf(this.redis).usable) return false;
      if (await this.writtenUpTo(target)) {
        if (this.flushedUpTo === null || idCompare(this.flushedUpTo, target) < 0) this.flushedUpTo = target;
        return true;
      }
      const left = deadline - performance.now();
      if (left <= 0) return false;
      await this.nextProgress(Math.min(left, 20));
    }
  }

  /** True when no entry up to `id` is left undelivered or delivered-but-unwritten in the group (any replica's). */
  private async writtenUpTo(id: string): Promise<boolean> {
    try {
      const [groups, pending] = await withRedisTimeout(
        Promise.all([
          this.redis.xinfo('GROUPS', this.stream) as Promise<unknown[][]>,
          this.redis.xpending(this.stream, GROUP) as Promise<[number, string | null, string | null, unknown]>,
        ]),
        COMMAND_TIMEOUT_MS,
      );
      const group = groups.map(pairs).find((g) => g.name === GROUP);
      // The consumer has not created its group yet: nothing was read.
      if (!group) return false;
      const delivered = String(group['last-delivered-id']);
      if (idCompare(delivered, id) < 0) return false;
      return Number(pending[0]) === 0 || pending[1] === null || idCompare(pending[1], id) > 0;
    } catch (err) {
      // The stream is gone: nothing is left to write. Anything else (no group yet, Redis not answering): try again.
      return /no such key/i.test((err as Error).message);
    }
  }

  async close(): Promise<void> {
    if (this.stopped) return;
    this.closed = true;
    this.resume();
    if (!this.loop) {
      // Appending only (SVC_ROLE=api): what this process accepted is in the stream, for the workers to write.
      this.stopped = true;
      this.conn.disconnect();
      return;
    }
    const done = await this.flush({ timeoutMs: 15_000 });
    if (!done) {
      this.opts.log.error(
        'shutting down before PostgreSQL took every usage record: they stay in the Redis stream for the next replica to write',
      );
    }
    this.stopped = true;
    if (this.reclaimTimer) clearInterval(this.reclaimTimer);
    // Wakes the blocked XREADGROUP empty-handed, so that the loop ends without being handed entries it would not write.
    await this.unblock();
    await Promise.race([this.loop?.catch(() => {}), sleep(BLOCK_MS + 500)]);
    this.conn.disconnect();
  }

  override pause(): void {
    super.pause();
    void this.unblock();
  }

  private async unblock(): Promise<void> {
    if (this.connId === null || this.redis.status !== 'ready') return;
    await withRedisTimeout(this.redis.client('UNBLOCK', this.connId), COMMAND_TIMEOUT_MS).catch(() => {});
  }

  private async ensureGroup(): Promise<void> {
    try {
      await this.conn.xgroup('CREATE', this.stream, GROUP, '0', 'MKSTREAM');
    } catch (err) {
      if (!/BUSYGROUP/.test((err as Error).message)) throw err;
    }
  }

  private async run(): Promise<void> {
    let backoff = 0;
    let haveGroup = false;
    /** Own pending entries (left by a failed write) are read again from then on; new ones meanwhile. */
    let historyAt = 0;
    let lastWriteAt = -Infinity;
    while (!this.stopped) {
      try {
        if (!haveGroup) {
          await this.ensureGroup();
          haveGroup = true;
        }
        // At most one batch per flush interval (SVC_OUTCOME_FLUSH_MS): under a moderate load each short read would
        // otherwise be a transaction of its own, competing with the requests for the event loop and for PostgreSQL.
        // Before the pause check: a pause that came during the wait must hold the read that follows.
        const since = performance.now() - lastWriteAt;
        if (since < this.opts.flushMs) await sleep(this.opts.flushMs - since);
        if (this.paused) await this.whenResumed();
        const history = historyAt > 0 && performance.now() >= historyAt;
        const res = (await (this.conn as unknown as ReadGroup).xreadgroup(
          'GROUP',
          GROUP,
          this.consumer,
          'COUNT',
          this.opts.batchSize ?? BATCH_SIZE,
          ...(history ? [] : ['BLOCK', historyAt > 0 ? Math.max(1, Math.ceil(historyAt - performance.now())) : BLOCK_MS]),
          'STREAMS',
          this.stream,
          history ? '0' : '>',
        )) as [string, StreamEntry[]][] | null;
        const entries = res?.[0]?.[1] ?? [];
        if (entries.length === 0) {
          if (history) historyAt = 0;
          continue;
        }
        if (this.paused) await this.whenResumed();
        lastWriteAt = performance.now();
        if (await this.write(this.conn, entries)) {
          if (!history) backoff = 0;
        } else {
          backoff = Math.min(5_000, Math.max(50, backoff * 2));
          historyAt = performance.now() + backoff;
          // While PostgreSQL does not answer, reading more would only pile up pending entries.
          await sleep(backoff);
        }
      } catch (err) {
        if (this.stopped) break;
        if (/NOGROUP/.test((err as Error).message)) haveGroup = false;
        else this.opts.log.debug({ err: (err as Error).message }, 'outcome consumer: Redis error; retrying');
        backoff = Math.min(5_000, Math.max(100, backoff * 2));
        await sleep(backoff);
      }
    }
  }

  /** One batch: written in one transaction, then acknowledged and deleted. False (left pending) if the write failed. */
  private async write(conn: Redis, entries: StreamEntry[]): Promise<boolean> {
    const outcomes: InferenceOutcome[] = [];
    const idOf = new Map<InferenceOutcome, string>();
    const dead: { id: string; text: string; error: string }[] = [];
    for (const [id, fields] of entries) {
      // Null fields: an entry already deleted (written by another replica) that was still pending here.
      if (!fields) continue;
      const text = fields[fields.indexOf('o') + 1] ?? '';
      try {
        const o = decodeOutcome(text);
        outcomes.push(o);
        idOf.set(o, id);
      } catch (err) {
        dead.push({ id, text, error: (err as Error).message });
      }
    }
    const { retry, poison, error } = outcomes.length > 0 ? await this.persistIsolating(outcomes) : { retry: [], poison: [] };
    for (const o of poison) dead.push({ id: idOf.get(o)!, text: encodeOutcome(o), error: String((error as Error)?.message ?? error) });
    if (retry.length > 0) {
      this.opts.log.warn({ err: (error as Error).message, outcomes: retry.length }, 'usage records not written yet; they stay in the stream');
    }
    const kept = new Set(retry.map((o) => idOf.get(o)));
    const ids = entries.map(([id]) => id).filter((id) => !kept.has(id));
    const now = Date.now();
    for (const id of ids) this.lag.add(Math.max(0, now - Number(id.split('-')[0])));
    try {
      const tx = conn.multi();
      // Set aside, never silently dropped: `<stream>:dead` keeps the entry and why it could not be written.
      for (const d of dead) tx.xadd(`${this.stream}:dead`, '*', 'o', d.text, 'error', d.error, 'id', d.id);
      if (ids.length > 0) tx.xack(this.stream, GROUP, ...ids).xdel(this.stream, ...ids);
      await tx.exec();
      for (const d of dead) this.opts.log.error({ id: d.id, err: d.error }, `a usage stream entry that cannot be written was moved to ${this.stream}:dead`);
      this.counts.lost += dead.length;
    } catch (err) {
      // Still pending: written again later, which persistOutcomes turns into nothing.
      this.opts.log.debug({ err: (err as Error).message }, 'could not acknowledge usage stream entries');
    }
    this.notifyProgress();
    return retry.length === 0;
  }

  /** Takes over entries another consumer (a dead replica) read and has not written for the lease, and writes them. */
  private async reclaim(): Promise<void> {
    if (this.reclaiming || this.stopped || this.paused || this.redis.status !== 'ready') return;
    this.reclaiming = true;
    try {
      let cursor = '0-0';
      do {
        const [next, entries] = (await withRedisTimeout(
          this.redis.xautoclaim(this.stream, GROUP, this.consumer, this.leaseMs, cursor, 'COUNT', this.opts.batchSize ?? BATCH_SIZE),
          COMMAND_TIMEOUT_MS,
        )) as [string, StreamEntry[], string[]?];
        cursor = next;
        if (entries.length > 0 && !(await this.write(this.redis, entries))) break;
      } while (cursor !== '0-0' && !this.stopped);
      await this.forgetDeadConsumers();
    } catch (err) {
      this.opts.log.debug({ err: (err as Error).message }, 'outcome reclaim pass failed');
    } finally {
      this.reclaiming = false;
    }
  }

  /** Consumers of replicas long gone, with nothing pending: removed so the group does not grow forever. */
  private async forgetDeadConsumers(): Promise<void> {
    const consumers = ((await withRedisTimeout(this.redis.xinfo('CONSUMERS', this.stream, GROUP), COMMAND_TIMEOUT_MS)) as unknown[][]).map(pairs);
    for (const c of consumers) {
      if (c.name !== this.consumer && Number(c.pending) === 0 && Number(c.idle) > 10 * this.leaseMs) {
        await this.redis.xgroup('DELCONSUMER', this.stream, GROUP, String(c.name));
      }
    }
  }
}

function pairs(flat: unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[String(flat[i])] = flat[i + 1];
  return out;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref());
}

/**
 * consume false (SVC_ROLE=api): this process only appends to the stream; the worker processes' consumers write it.
 * Needs Redis (config.ts refuses the role without it).
 */
export function createOutcomeWriter(
  opts: OutcomeWriterOptions & { redis: Redis | null; redisPrefix: string; leaseMs: number; consume: boolean },
): OutcomeWriter {
  if (!opts.redis) return new MemoryOutcomeWriter(opts);
  const writer = new RedisOutcomeWriter(opts, opts.redis, opts.redisPrefix, opts.leaseMs);
  if (opts.consume) writer.start();
  return writer;
}
