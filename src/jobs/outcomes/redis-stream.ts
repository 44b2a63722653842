import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { InferenceOutcome } from '../../domain/usage/outcome.ts';
import type { OutcomeQueue } from '../../domain/usage/ports.ts';
import { redisBatchOf } from '../../redis/batch.ts';
import type { Redis } from '../../redis/connection.ts';
import { redisHealthOf, withRedisTimeout } from '../../redis/health.ts';
import { BATCH_SIZE, OutcomeBatchWriter, type OutcomeWriterOptions } from './batch-writer.ts';
import { decodeOutcome, decodeOutcomeBatch, encodeOutcome, encodeOutcomeBatch } from './codec.ts';

const BLOCK_MS = 2_000;
const COMMAND_TIMEOUT_MS = 2_000;
const GROUP = 'writers';
/**
 * SVC_OUTCOME_STREAM_MS's default: the consumer reads at most one batch per 100 ms. The entries are durable in the
 * stream meanwhile, so the pause costs no safety, only how soon a record is in PostgreSQL; and a batch costs about
 * 4 ms of worker CPU and 3 ms of PostgreSQL CPU whatever its size (bench: at 1,000 inferences/s the worker's CPU per
 * inference went from 315 to 143 µs and PostgreSQL's from 233 to 125 µs, 20 → 100 ms). A flush() in the consuming
 * process (a usage or budget read) cuts the pause short.
 */
export const STREAM_MS = 100;

/** "<ms>-<seq>" stream ids compared as numbers. */
function idCompare(a: string, b: string): number {
  const [am, as] = a.split('-').map(BigInt) as [bigint, bigint];
  const [bm, bs] = b.split('-').map(BigInt) as [bigint, bigint];
  return am === bm ? (as === bs ? 0 : as < bs ? -1 : 1) : am < bm ? -1 : 1;
}

type StreamEntry = [id: string, fields: string[] | null];
type ReadGroup = { xreadgroup(...args: (string | number)[]): Promise<unknown> };

/** With Redis: the stream write-ahead log and its consumer. */
export class RedisOutcomeWriter extends OutcomeBatchWriter implements OutcomeQueue {
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
  /** Ends the consumer's pause between batches early (a flush() waits on this process's consumer). */
  private hurry: (() => void) | null = null;
  private hurried = false;

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
    // Redis reconnecting or not answering (redis/health.ts): queueing the entry would hold the request; write it directly.
    const batch = redisBatchOf(this.redis);
    if (this.closed || !batch.usable) return this.direct(o);
    try {
      // An operation of the turn's batch (redis/batch.ts): the outcomes finishing in this turn become ONE stream
      // entry (entryFields), whose XADD travels in the script call that carries their settlement and spend; each caller
      // answers once Redis has acknowledged it. Not answered within the client's commandTimeout (Redis dying), the
      // outcome is written directly instead; should the XADD land after all, it is written once anyway.
      const id = (await batch.gather(this, 'X', [this.stream], o, this.entryFields)) as string | null;
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

  /**
   * One turn's outcomes as the fields of one entry: `b`, their JSON array (codec.ts) without the retained contents, and
   * `c`, the contents sealed together (one AES-GCM per turn, not per request; the `b` text is the associated data, so
   * sealed contents moved onto another entry do not open), left out when none retains content. An entry of an earlier
   * version (`o`: one outcome, its content sealed alone) is still read.
   */
  private readonly entryFields = (outcomes: InferenceOutcome[]): string[] => {
    const { outcomes: text, contents } = encodeOutcomeBatch(outcomes);
    return contents === null ? ['b', text] : ['b', text, 'c', this.opts.sealer.seal(contents, text)];
  };

  /** An entry's outcomes, contents opened (both entry forms: see entryFields). Throws on an entry that cannot be read. */
  private decodeEntry(fields: string[]): InferenceOutcome[] {
    const at = fields.indexOf('b');
    if (at < 0) return [decodeOutcome(fields[fields.indexOf('o') + 1] ?? '')];
    const text = fields[at + 1] ?? '';
    const c = fields.indexOf('c');
    return decodeOutcomeBatch(text, c < 0 ? null : this.opts.sealer.open(fields[c + 1] ?? '', text));
  }

  async flush(opts: { timeoutMs?: number } = {}): Promise<boolean> {
    const target = this.lastId;
    if (target === null || (this.flushedUpTo !== null && idCompare(this.flushedUpTo, target) >= 0)) return true;
    // This process consumes: its next read need not wait for the interval.
    if (this.loop) {
      this.hurried = true;
      this.hurry?.();
    }
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
        // At most one batch per interval (SVC_OUTCOME_STREAM_MS): under a moderate load each short read would otherwise
        // be a transaction of its own, competing with the requests for the CPU and for PostgreSQL (see STREAM_MS).
        // Before the pause check: a pause that came during the wait must hold the read that follows.
        const since = performance.now() - lastWriteAt;
        const pace = this.opts.streamMs ?? STREAM_MS;
        if (since < pace && !this.hurried) await this.wait(pace - since);
        this.hurried = false;
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
    const dead: { id: string; fields: string[]; error: string }[] = [];
    for (const [id, fields] of entries) {
      // Null fields: an entry already deleted (written by another replica) that was still pending here.
      if (!fields) continue;
      try {
        for (const o of this.decodeEntry(fields)) {
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
      const tx = conn.multi();
      // Set aside, never silently dropped: `<stream>:dead` keeps the entry and why it could not be written.
      for (const d of dead) tx.xadd(`${this.stream}:dead`, '*', ...d.fields, 'error', d.error, 'id', d.id);
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

  /** The pause between batches, which flush() ends early. */
  private wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        if (this.hurry === done) this.hurry = null;
        resolve();
      };
      const timer = setTimeout(done, ms).unref();
      this.hurry = done;
    });
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
