import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { InferenceOutcome } from '../../domain/usage/outcome.ts';
import type { OutcomeQueue } from '../../domain/usage/ports.ts';
import { InFlight } from '../../kernel/in-flight.ts';
import { redisBatchOf } from '../../redis/batch.ts';
import { duplicateRedis, isCluster, type Redis, type RedisServer } from '../../redis/connection.ts';
import { redisHealthOf, withRedisTimeout } from '../../redis/health.ts';
import { BATCH_SIZE, OutcomeBatchWriter, type OutcomeWriterOptions } from './batch-writer.ts';
import { decodeStreamEntry, encodeOutcome, streamEntryFields } from './codec.ts';
import { COMMAND_TIMEOUT_MS, forgetDeadConsumers, writtenUpTo, idCompare, pairs, RecentAppends, shardOfProject, ShardLeases, sleep, usageStreamKeys, type AtRiskEntry, type Shard, type ShardConsumer } from './stream-shards.ts';

const BLOCK_MS = 2_000;
/** On a Cluster a blocked read cannot be woken (CLIENT UNBLOCK would go to another node): shorter blocks instead. */
const CLUSTER_BLOCK_MS = 500;
const GROUP = 'writers';
/**
 * SVC_OUTCOME_STREAM_MS's default: the consumer reads at most one batch per 100 ms. The entries are durable in the
 * stream meanwhile, so the pause costs no safety, only how soon a record is in PostgreSQL; and a batch costs about
 * 4 ms of worker CPU and 3 ms of PostgreSQL CPU whatever its size (bench: at 1,000 inferences/s the worker's CPU per
 * inference went from 315 to 143 µs and PostgreSQL's from 233 to 125 µs, 20 → 100 ms). A flush() in the consuming
 * process (a usage or budget read) cuts the pause short.
 */
export const STREAM_MS = 100;
/**
 * How often an appending process asks whether the entries it appended at least this long ago are written (one
 * `XINFO GROUPS` + `XPENDING` per shard with such entries), and lets their at-risk copies go: with the consumer's
 * 100 ms pace, under load the copies of the last 250-500 ms are kept instead of AT_RISK_MS's (docs/PERFORMANCE.md).
 */
export const RELEASE_MS = 250;

/** One outcome on its way into a stream entry, and that entry once it is made (fieldsOf). */
interface Posting {
  o: InferenceOutcome;
  entry: AtRiskEntry | null;
}


type StreamEntry = [id: string, fields: string[] | null];
type ReadGroup = { xreadgroup(...args: (string | number)[]): Promise<unknown> };
/**
 * With Redis: the stream write-ahead log and its consumers. The stream is sharded (SVC_USAGE_STREAM_SHARDS) by
 * project; each shard is read by ONE consumer at a time, the holder of its lease (`<shard>:lease`, renewed every
 * tick). Consumers announce themselves in `<prefix>usage:consumers` and each takes at most its share of the shards
 * (shards / live consumers, rounded up), so the shards spread over the worker processes; a consumer that dies stops
 * renewing, and within a lease (SVC_OUTCOME_LEASE_MS) another takes its shards over, with the entries it had read but
 * not written (XAUTOCLAIM). Writing an entry twice writes it once (persistOutcomes), so a consumer that lost its lease
 * while writing costs nothing.
 */
export class RedisOutcomeWriter extends OutcomeBatchWriter implements OutcomeQueue {
  readonly kind = 'redis' as const;
  readonly shards: Shard[];
  readonly consumer = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private readonly leases: ShardLeases;
  private readonly cluster: boolean;
  private consuming = false;
  private stopped = false;
  private reclaimTimer: NodeJS.Timeout | null = null;
  private leaseTimer: NodeJS.Timeout | null = null;
  private reclaiming = false;
  private warnedFallback = false;
  /**
   * The entries appended within AT_RISK_MS, to append again should Redis go down (a failover may have lost them). Kept
   * as the entry's fields, the strings written anyway: two or three flat strings per turn instead of each outcome's
   * object graph, which the garbage collector would trace and copy while they are kept; and kept only until the
   * shard's consumer has written the entry (releaseWritten).
   */
  private readonly recent = new RecentAppends();
  private releaseTimer: NodeJS.Timeout | null = null;
  private releasing = false;
  /** One turn's outcomes (all of one shard) as one stream entry's fields (codec.ts streamEntryFields), remembered. */
  private readonly fieldsOf = (postings: Posting[]): string[] => {
    const outcomes = postings.map((p) => p.o);
    const fields = streamEntryFields(outcomes, this.opts.sealer);
    const entry: AtRiskEntry = { shard: this.shards[shardOfProject(outcomes[0]!.projectId, this.shards.length)]!, fields, id: null };
    this.recent.remember(entry);
    for (const p of postings) p.entry = entry;
    return fields;
  };

  constructor(
    opts: OutcomeWriterOptions,
    private readonly redis: Redis,
    prefix: string,
    private readonly leaseMs: number,
    shards = 1,
  ) {
    super(opts);
    this.cluster = isCluster(redis);
    this.shards = usageStreamKeys(prefix, shards).map((stream, index) => ({
      index,
      stream,
      lease: `${stream}:lease`,
      lastId: null,
      flushedUpTo: null,
      consumer: null,
    }));
    this.leases = new ShardLeases(redis, this.shards, `${prefix}usage:consumers`, this.consumer, leaseMs, {
      stopped: () => this.stopped,
      mayTake: () => !this.stopped && !this.paused,
      take: (s) => this.takeShard(s),
      drop: (s, release) => this.dropShard(s, release),
    }, opts.log);
    const health = redisHealthOf(redis);
    health.onDown(() => this.recent.setAside());
    // flush() waits for these appends too, and then for the entries they made (their ids move the shards' lastId).
    health.onRecovered(() => void this.tracked(this.appendAgain()));
    this.releaseTimer = setInterval(() => void this.releaseWritten(), RELEASE_MS);
    this.releaseTimer.unref();
  }

  /** The first shard's stream (with one shard, THE stream): tests and tools that look at one stream. */
  get stream(): string {
    return this.shards[0]!.stream;
  }

  start(): void {
    if (this.consuming) return;
    this.consuming = true;
    const every = Math.max(200, Math.min(2_000, Math.floor(this.leaseMs / 2)));
    this.reclaimTimer = setInterval(() => void this.reclaim(), every);
    this.reclaimTimer.unref();
    this.leaseTimer = setInterval(() => void this.leases.tick(), this.leases.tickMs);
    this.leaseTimer.unref();
    // The groups exist from the start (whoever takes a shard reads it from its first entry on), and then the leases.
    void Promise.all(this.shards.map((s) => this.ensureGroup(this.redis, s.stream)))
      .catch((err: unknown) => this.opts.log.debug({ err: (err as Error).message }, 'usage stream: could not create the consumer groups yet'))
      .then(() => this.leases.tick());
  }

  private takeShard(s: Shard): void {
    const conn = duplicateRedis(this.redis, 'blocking');
    conn.on('error', (err: Error) => this.opts.log.debug({ err: err.message }, 'outcome consumer connection error'));
    const c: ShardConsumer = { conn, loop: Promise.resolve(), stopped: false, connId: null, hurry: null, hurried: false };
    if (!this.cluster) {
      conn.on('ready', () => {
        (conn as RedisServer).client('ID').then(
          (id) => (c.connId = Number(id)),
          () => {},
        );
      });
    }
    s.consumer = c;
    c.loop = this.run(s, c);
  }

  /** Stops the shard's consumer (its batch in flight finishes); `release`: the lease is given back at once. */
  private async dropShard(s: Shard, release: boolean): Promise<void> {
    const c = s.consumer;
    if (!c) return;
    s.consumer = null;
    c.stopped = true;
    c.hurry?.();
    await this.unblock(c);
    await Promise.race([c.loop.catch(() => {}), sleep(BLOCK_MS + 500)]);
    c.conn.disconnect();
    if (release) await this.leases.release(s);
  }

  async record(o: InferenceOutcome): Promise<void> {
    this.counts.accepted++;
    // Redis reconnecting or not answering (redis/health.ts): queueing the entry would hold the request; write it directly.
    const batch = redisBatchOf(this.redis);
    if (this.closed || !batch.usable) return this.direct(o);
    const shard = this.shards[shardOfProject(o.projectId, this.shards.length)]!;
    // A posted operation of the turn's batch (redis/batch.ts): the outcomes of one shard finishing in this turn become
    // ONE stream entry (entryFields), whose XADD travels in the script call that carries their settlement and spend (on
    // a Cluster: the call of the shard's slot). The caller answers once that call is in the kernel's socket buffer
    // (a kill -9 of this process no longer loses it), not once Redis acknowledged it; see afterAnswer for the rest.
    const posting: Posting = { o, entry: null };
    const posted = batch.gatherPosted(shard, 'X', [shard.stream], posting, this.fieldsOf);
    const acked = this.afterAnswer(shard, posting, posted.answer);
    if ((await posted.durable) === 'answered') await acked;
  }

  /** Entries written to Redis whose acknowledgement has not come back yet: flush() waits for them first. */
  private readonly unacked = new InFlight<Promise<void>>();

  /**
   * The entry's acknowledgement, whenever it comes (usually after the response was sent): the shard's newest id (for
   * flush()). Refused or not answered within the client's commandTimeout (Redis dying), the outcome is written directly
   * instead (in the background when the response has gone); should the XADD land after all, it is written once anyway
   * (persistOutcomes writes each request once). Never rejects.
   */
  private afterAnswer(shard: Shard, posting: Posting, answer: Promise<unknown>): Promise<void> {
    const { o } = posting;
    return this.tracked(
      answer.then(
        (id) => {
          // The entry is made when the turn's call is (fieldsOf), after this was set up.
          this.appended(shard, id, posting.entry);
          this.warnedFallback = false;
        },
        async (err: unknown) => {
          if (!this.warnedFallback) {
            this.warnedFallback = true;
            this.opts.log.warn({ err: (err as Error).message }, 'the usage stream refused an entry: writing usage records directly to PostgreSQL');
          }
          await this.direct(o);
        },
      ),
    );
  }

  /** `done` (which never rejects) among the appends flush() waits for, until it settles. */
  private tracked(done: Promise<void>): Promise<void> {
    const handle = this.unacked.add(done);
    return done.finally(() => this.unacked.delete(handle));
  }

  /**
   * An entry's id, as XADD answered it: the shard's newest, which flush() waits for a consumer to have written; and the
   * at-risk entry's, which releaseWritten asks about.
   */
  private appended(shard: Shard, id: unknown, entry: AtRiskEntry | null): void {
    if (typeof id !== 'string') return;
    if (entry) entry.id = id;
    if (shard.lastId === null || idCompare(id, shard.lastId) > 0) shard.lastId = id;
  }

  /**
   * Lets go of the at-risk copies of entries a consumer has written to PostgreSQL (a failover that loses them from the
   * stream loses nothing): per shard, the newest entry appended at least `olderThanMs` ago that Redis acknowledged is
   * looked up in the consumer group; written (delivered, not pending), it and the shard's earlier entries are let go.
   * Asked of the master that acknowledged them: should Redis go down meanwhile (a failover), the pass lets nothing go.
   * How many entries were let go; never rejects.
   */
  async releaseWritten(opts: { olderThanMs?: number } = {}): Promise<number> {
    if (this.releasing || this.stopped) return 0;
    this.releasing = true;
    let released = 0;
    try {
      const generation = this.recent.generation;
      for (const [shard, id] of this.recent.releasable(performance.now() - (opts.olderThanMs ?? RELEASE_MS))) {
        if (!redisHealthOf(this.redis).usable) break;
        const written = await writtenUpTo(this.redis, shard.stream, GROUP, id, false);
        if (this.recent.generation !== generation) break;
        if (written) released += this.recent.release(shard, id);
      }
    } catch (err) {
      this.opts.log.debug({ err: (err as Error).message }, 'usage stream: could not ask which entries are written');
    } finally {
      this.releasing = false;
    }
    return released;
  }

  /** After an outage: the outcomes appended just before it, again (a failover may have lost them; see AT_RISK_MS). Never rejects. */
  private async appendAgain(): Promise<void> {
    const entries = this.recent.takeSetAside();
    if (entries.length === 0) return;
    let again: { shard: Shard; o: InferenceOutcome }[];
    try {
      again = entries.flatMap(({ shard, fields }) => (fields ? decodeStreamEntry(fields, this.opts.sealer).map((o) => ({ shard, o })) : []));
    } catch (err) {
      // Entries this process encoded itself: not expected to fail; nothing to append again if they do.
      this.opts.log.error({ err: (err as Error).message }, 'the usage entries of the moments before the Redis outage could not be read to append them again');
      return;
    }
    const batch = redisBatchOf(this.redis);
    await Promise.all(
      again.map(async ({ shard, o }) => {
        try {
          if (!batch.usable) throw new Error('Redis does not answer');
          const posting: Posting = { o, entry: null };
          this.appended(shard, await batch.gather(shard, 'X', [shard.stream], posting, this.fieldsOf), posting.entry);
        } catch {
          await this.direct(o);
        }
      }),
    );
    this.opts.log.info({ outcomes: again.length }, 'appended the usage entries of the moments before the Redis outage again (each is written once)');
  }

  /** True once every entry this process appended (on every shard) is written, by whichever consumer holds its shard. */
  async flush(opts: { timeoutMs?: number } = {}): Promise<boolean> {
    const deadline = opts.timeoutMs === undefined ? Infinity : performance.now() + opts.timeoutMs;
    // Entries written but not acknowledged yet: their ids (or their direct writes) first.
    if (this.unacked.size > 0) {
      const waiting = Promise.all(this.unacked.values());
      if (opts.timeoutMs === undefined) await waiting;
      else if (!(await Promise.race([waiting.then(() => true), sleep(opts.timeoutMs).then(() => false)]))) return false;
    }
    const due = this.shards.filter((s) => s.lastId !== null && (s.flushedUpTo === null || idCompare(s.flushedUpTo, s.lastId) < 0));
    if (due.length === 0) return true;
    const results = await Promise.all(due.map((s) => this.flushShard(s, s.lastId!, deadline)));
    return results.every(Boolean);
  }

  private async flushShard(s: Shard, target: string, deadline: number): Promise<boolean> {
    // This process consumes the shard: its next read need not wait for the interval.
    const c = s.consumer;
    if (c) {
      c.hurried = true;
      c.hurry?.();
    }
    // Closed: this consumer writes no more; another replica may still have written them.
    if (this.stopped) return writtenUpTo(this.redis, s.stream, GROUP, target);
    for (;;) {
      // Redis not answering: the stream cannot be asked, and waiting for it would hold the caller (a budget read).
      if (!redisHealthOf(this.redis).usable) return false;
      if (await writtenUpTo(this.redis, s.stream, GROUP, target)) {
        if (s.flushedUpTo === null || idCompare(s.flushedUpTo, target) < 0) s.flushedUpTo = target;
        return true;
      }
      const left = deadline - performance.now();
      if (left <= 0) return false;
      await this.nextProgress(Math.min(left, 20));
    }
  }

  async close(): Promise<void> {
    if (this.stopped) return;
    this.closed = true;
    if (this.releaseTimer) clearInterval(this.releaseTimer);
    this.resume();
    if (!this.consuming) {
      // Appending only (SVC_ROLE=api): what this process accepted is in the stream, for the workers to write, once the
      // entries written and not acknowledged yet are (a refused one is written directly meanwhile).
      if (this.unacked.size > 0) await Promise.race([Promise.all(this.unacked.values()), sleep(15_000)]);
      this.stopped = true;
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
    if (this.leaseTimer) clearInterval(this.leaseTimer);
    await this.leases.settled();
    // Each consumer is woken empty-handed, so that its loop ends without being handed entries it would not write; its
    // lease is given back, so another replica takes the shard at its next tick rather than after the lease.
    await Promise.all(this.shards.map((s) => this.dropShard(s, true)));
    await this.leases.leave();
  }

  override pause(): void {
    super.pause();
    for (const s of this.shards) if (s.consumer) void this.unblock(s.consumer);
  }

  /**
   * Wakes a blocked XREADGROUP (CLIENT UNBLOCK on the shared client). On a Cluster the shared client cannot address the
   * consumer's node, so the consumer blocks for short reads there instead (CLUSTER_BLOCK_MS).
   */
  private async unblock(c: ShardConsumer): Promise<void> {
    if (this.cluster || c.connId === null || this.redis.status !== 'ready') return;
    await withRedisTimeout((this.redis as RedisServer).client('UNBLOCK', c.connId), COMMAND_TIMEOUT_MS).catch(() => {});
  }

  private async ensureGroup(conn: Redis, stream: string): Promise<void> {
    try {
      await conn.xgroup('CREATE', stream, GROUP, '0', 'MKSTREAM');
    } catch (err) {
      if (!/BUSYGROUP/.test((err as Error).message)) throw err;
    }
  }

  private async run(s: Shard, c: ShardConsumer): Promise<void> {
    const stream = s.stream;
    let backoff = 0;
    let haveGroup = false;
    /** Own pending entries (left by a failed write) are read again from then on; new ones meanwhile. */
    let historyAt = 0;
    let lastWriteAt = -Infinity;
    let tookOver = false;
    const blockMs = this.cluster ? CLUSTER_BLOCK_MS : BLOCK_MS;
    while (!c.stopped && !this.stopped) {
      try {
        if (!haveGroup) {
          await this.ensureGroup(c.conn, stream);
          haveGroup = true;
        }
        if (!tookOver) {
          // The shard's previous holder may have died with entries read and not written: they are this consumer's now.
          await this.reclaimShard(s, 0);
          tookOver = true;
        }
        // At most one batch per interval (SVC_OUTCOME_STREAM_MS): under a moderate load each short read would otherwise
        // be a transaction of its own, competing with the requests for the CPU and for PostgreSQL (see STREAM_MS).
        // Before the pause check: a pause that came during the wait must hold the read that follows.
        const since = performance.now() - lastWriteAt;
        const pace = this.opts.streamMs ?? STREAM_MS;
        if (since < pace && !c.hurried) await this.wait(c, pace - since);
        c.hurried = false;
        if (this.paused) await this.whenResumed();
        if (c.stopped) break;
        const history = historyAt > 0 && performance.now() >= historyAt;
        const res = (await (c.conn as unknown as ReadGroup).xreadgroup(
          'GROUP',
          GROUP,
          this.consumer,
          'COUNT',
          this.opts.batchSize ?? BATCH_SIZE,
          ...(history ? [] : ['BLOCK', historyAt > 0 ? Math.max(1, Math.min(blockMs, Math.ceil(historyAt - performance.now()))) : blockMs]),
          'STREAMS',
          stream,
          history ? '0' : '>',
        )) as [string, StreamEntry[]][] | null;
        const entries = res?.[0]?.[1] ?? [];
        if (entries.length === 0) {
          if (history) historyAt = 0;
          continue;
        }
        if (this.paused) await this.whenResumed();
        lastWriteAt = performance.now();
        if (await this.write(c.conn, s, entries)) {
          if (!history) backoff = 0;
        } else {
          backoff = Math.min(5_000, Math.max(50, backoff * 2));
          historyAt = performance.now() + backoff;
          // While PostgreSQL does not answer, reading more would only pile up pending entries.
          await sleep(backoff);
        }
      } catch (err) {
        if (c.stopped || this.stopped) break;
        if (/NOGROUP/.test((err as Error).message)) haveGroup = false;
        else this.opts.log.debug({ err: (err as Error).message }, 'outcome consumer: Redis error; retrying');
        backoff = Math.min(5_000, Math.max(100, backoff * 2));
        await sleep(backoff);
      }
    }
  }

  /** One batch: written in one transaction, then acknowledged and deleted. False (left pending) if the write failed. */
  private async write(conn: Redis, s: Shard, entries: StreamEntry[]): Promise<boolean> {
    const outcomes: InferenceOutcome[] = [];
    const idOf = new Map<InferenceOutcome, string>();
    const dead: { id: string; fields: string[]; error: string }[] = [];
    for (const [id, fields] of entries) {
      // Null fields: an entry already deleted (written by another replica) that was still pending here.
      if (!fields) continue;
      try {
        for (const o of decodeStreamEntry(fields, this.opts.sealer)) {
          outcomes.push(o);
          idOf.set(o, id);
        }
      } catch (err) {
        // Kept as it was (its contents still sealed): a malformed entry, or sealed with another key than this one's.
        dead.push({ id, fields, error: (err as Error).message });
      }
    }
    const { retry, poison, error } = outcomes.length > 0 ? await this.persistIsolating(outcomes) : { retry: [], poison: [] };
    for (const o of poison) {
      dead.push({ id: idOf.get(o)!, fields: ['o', encodeOutcome(o, this.opts.sealer)], error: String((error as Error)?.message ?? error) });
    }
    if (retry.length > 0) {
      this.opts.log.warn({ err: (error as Error).message, outcomes: retry.length }, 'usage records not written yet; they stay in the stream');
    }
    const kept = new Set(retry.map((o) => idOf.get(o)));
    const ids = entries.map(([id]) => id).filter((id) => !kept.has(id));
    const now = Date.now();
    for (const id of ids) this.lag.add(Math.max(0, now - Number(id.split('-')[0])));
    try {
      // Set aside, never silently dropped: `<stream>:dead` keeps the entry and why it could not be written. Before the
      // acknowledgement (its own command: with one shard the twin has no tag of the stream's, so on a Cluster it may live
      // on another slot): a failure leaves the entry pending, and it is set aside again, never lost.
      for (const d of dead) await conn.xadd(`${s.stream}:dead`, '*', ...d.fields, 'error', d.error, 'id', d.id);
      if (ids.length > 0) await conn.multi().xack(s.stream, GROUP, ...ids).xdel(s.stream, ...ids).exec();
      for (const d of dead) this.opts.log.error({ id: d.id, err: d.error }, `a usage stream entry that cannot be written was moved to ${s.stream}:dead`);
      this.counts.lost += dead.length;
    } catch (err) {
      // Still pending: written again later, which persistOutcomes turns into nothing.
      this.opts.log.debug({ err: (err as Error).message }, 'could not acknowledge usage stream entries');
    }
    this.notifyProgress();
    return retry.length === 0;
  }

  /** The pause between batches, which flush() (and dropping the shard) ends early. */
  private wait(c: ShardConsumer, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        if (c.hurry === done) c.hurry = null;
        resolve();
      };
      const timer = setTimeout(done, ms).unref();
      c.hurry = done;
    });
  }

  /** Takes over, on each shard this process holds, entries another consumer read and has not written for the lease. */
  private async reclaim(): Promise<void> {
    if (this.reclaiming || this.stopped || this.paused || !redisHealthOf(this.redis).usable) return;
    this.reclaiming = true;
    try {
      for (const s of this.shards) {
        if (!s.consumer || this.stopped) continue;
        await this.reclaimShard(s, this.leaseMs);
        await forgetDeadConsumers(this.redis, s.stream, GROUP, this.consumer, this.leaseMs);
      }
    } catch (err) {
      this.opts.log.debug({ err: (err as Error).message }, 'outcome reclaim pass failed');
    } finally {
      this.reclaiming = false;
    }
  }

  /** Claims the shard's entries pending with other consumers for at least `minIdleMs` (0: all, on taking the lease) and writes them. */
  private async reclaimShard(s: Shard, minIdleMs: number): Promise<void> {
    let cursor = '0-0';
    do {
      const [next, entries] = (await withRedisTimeout(
        this.redis.xautoclaim(s.stream, GROUP, this.consumer, minIdleMs, cursor, 'COUNT', this.opts.batchSize ?? BATCH_SIZE),
        COMMAND_TIMEOUT_MS,
      )) as [string, StreamEntry[], string[]?];
      cursor = next;
      if (entries.length > 0 && !(await this.write(this.redis, s, entries))) break;
    } while (cursor !== '0-0' && !this.stopped && s.consumer);
  }

}
