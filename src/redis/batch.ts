import type { Socket } from 'node:net';
import { ReplyError } from 'ioredis';
import { isCluster, type Redis } from './connection.ts';
import { redisHealthOf, RedisUnavailableError, type RedisHealth } from './health.ts';
import { keySlot } from './slot.ts';
import { BATCH_LUA, encodeBatch, type BatchOp } from './batch-script.ts';

/**
 * The hot path's Redis commands, batched: every operation issued during one turn of the event loop (by every request
 * in flight: the limiter's windows and settlement, the budget counters' read and add, the response cache's get and
 * set, the usage stream's entry, which gathers the turn's outcomes into one XADD) leaves as ONE script call (EVALSHA
 * of BATCH_LUA) at the end of that turn (setImmediate), and each caller gets its own operation's answer. Per inference that is one command before the
 * provider call and one after it, shared with every other request finishing in the same turn; the Lua interpreter runs
 * the operations in the order they were issued, atomically, so nothing another client does slips between them.
 * Only the call before the provider is waited for (run(): its answers decide the request). The operations after it
 * are posted (post(), gatherPosted()): their callers go on once the call carrying them is in the kernel's socket
 * buffer, which a kill -9 of the gateway does not take back, and Redis's answer is handled when it comes (a lone
 * request makes one round trip, not two: docs/PERFORMANCE.md, "One round trip on the request path").
 *
 * Each operation runs under pcall: one that fails (a script bug, WRONGTYPE) rejects only its caller, with a ReplyError
 * carrying Redis's message. The call itself is tracked by the shared health state (health.ts) as one command:
 * when it fails without an answer (the client's commandTimeout, a dropped connection) Redis is marked down and every
 * operation of the batch is rejected at once; while down nothing is queued (callers check `usable` and take their
 * degraded path). The batch has no timer of its own: the client's commandTimeout is the one timer of the call.
 *
 * Keys: every key an operation touches is passed in KEYS, and all keys of one operation share a hash tag (a project's
 * `{prj_…}`, a usage-stream shard's tag). On one server (or behind Sentinel) a turn's operations leave as one call. On
 * a Redis Cluster a script may only touch keys of one slot, so the turn's operations are grouped by slot: one call per
 * slot per turn, each sent to its slot's master (auto-pipelined: one socket write per master). Per inference that is
 * still one call before the provider call and one after it, since a request's operations all carry its project's tag
 * (and its usage entry rides in its shard's call).
 */

interface Pending {
  op: BatchOp;
  keys: readonly string[];
  args: readonly (string | number)[];
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
  /** post(): told once how the operation became durable (its call written to the kernel, or answered). */
  durable?: (how: Durable) => void;
}

/**
 * How a posted operation became safe from a crash of this process: `written`, its script call is in the kernel's
 * socket buffer (the answer follows); `answered`, Redis answered (or the call failed) before that could be said.
 */
export type Durable = 'written' | 'answered';

/** What post() and gatherPosted() hand back: when the operation is durable, and Redis's answer. */
export interface Posted<T> {
  /** Never rejects. After `answered`, `answer` is settled already. */
  durable: Promise<Durable>;
  /** Redis's answer, or the operation's error (marked handled: a caller that stopped listening leaves no unhandled rejection). */
  answer: Promise<T>;
}

/** A connection's socket as far as the write check needs it (net.Socket or tls.TLSSocket). */
type WriteStream = Pick<Socket, 'writable' | 'writableLength' | 'bytesWritten' | 'connecting'>;

/** One turn's merged operation: its items, how they become its arguments, and everyone waiting on it (gather). */
interface Gathered {
  group: object;
  op: BatchOp;
  keys: readonly string[];
  items: unknown[];
  args: (items: unknown[]) => readonly (string | number)[];
  waiters: { resolve: (value: unknown) => void; reject: (err: Error) => void; durable?: (how: Durable) => void }[];
}

type BatchCommand = { svcBatch(numKeys: number, ...args: (string | number)[]): Promise<unknown[]> };

/** Operations per script call: beyond it the turn's operations leave as several calls (still in one socket write). */
const MAX_OPS = 256;

export class RedisBatch {
  private queue: Pending[] = [];
  /**
   * This turn's merged operations (one per group, so one or two): a fresh array each turn, never a long-lived Map
   * cleared every turn, whose replaced hash tables V8 keeps linked to each other (kernel/in-flight.ts).
   */
  private gathered: Gathered[] = [];
  private scheduled = false;
  private readonly health: RedisHealth;
  private readonly command: BatchCommand;
  /**
   * Script calls sent and operations carried; `written`: calls found in the kernel's socket buffer as they were sent
   * (their posted operations durable before Redis answered). The bench and the hot-path test read these.
   */
  readonly counts = { calls: 0, ops: 0, written: 0 };

  /** On a Cluster: operations are grouped by hash slot (one script call per slot per turn). */
  private readonly bySlot: boolean;

  constructor(private readonly redis: Redis) {
    this.health = redisHealthOf(redis);
    this.bySlot = isCluster(redis);
    const r = redis as unknown as Partial<BatchCommand>;
    if (typeof r.svcBatch !== 'function') redis.defineCommand('svcBatch', { lua: BATCH_LUA });
    this.command = redis as unknown as BatchCommand;
  }

  /** Whether operations may be queued now (the shared health state; while down, take the degraded path instead). */
  get usable(): boolean {
    return this.health.usable;
  }

  /** Queues one operation for this turn's script call; its answer, or its own error, when the call returns. */
  run<T>(op: BatchOp, keys: readonly string[], args: readonly (string | number)[] = []): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ op, keys, args, resolve: resolve as (v: unknown) => void, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(this.flush);
      }
    });
  }

  /**
   * Queues one operation whose caller need not wait for Redis's answer, only for the operation to be safe from a crash
   * of this process (the settlement, spend and usage entry after a provider call, before the response is sent):
   * `durable` resolves `written` once the turn's script call carrying it is in the kernel's socket buffer, which a
   * kill -9 of the gateway does not take back (the kernel sends it on and closes the connection), and the answer
   * follows in `answer`. When that cannot be seen as the call is made (the connection is not ready, earlier bytes are
   * still waiting in the socket's user-space buffer, on a Cluster the slot's node is not connected), `durable` waits
   * for the answer instead (`answered`), as run() does.
   */
  post<T>(op: BatchOp, keys: readonly string[], args: readonly (string | number)[] = []): Posted<T> {
    let durable!: (how: Durable) => void;
    const whenDurable = new Promise<Durable>((r) => (durable = r));
    const answer = new Promise<T>((resolve, reject) => {
      this.queue.push({ op, keys, args, resolve: resolve as (v: unknown) => void, reject, durable });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(this.flush);
      }
    });
    answer.catch(() => {});
    return { durable: whenDurable, answer };
  }

  /** gather() for a posted operation (see post()): the usage stream's entry after a provider call. */
  gatherPosted<T>(group: object, op: BatchOp, keys: readonly string[], item: T, args: (items: T[]) => readonly (string | number)[]): Posted<unknown> {
    let durable!: (how: Durable) => void;
    const whenDurable = new Promise<Durable>((r) => (durable = r));
    const answer = this.gatherWith(group, op, keys, item, args, durable);
    answer.catch(() => {});
    return { durable: whenDurable, answer };
  }

  /**
   * Queues `item` into this turn's merged operation of `group`: everything gathered under one group during the turn
   * leaves as ONE operation, whose arguments `args(items)` makes at the end of the turn (so that per-turn work, such
   * as sealing, is done once), and every caller gets that operation's answer. If `args` throws, every caller gets the
   * error. The usage stream uses it: one XADD per turn instead of one per request.
   */
  gather<T>(group: object, op: BatchOp, keys: readonly string[], item: T, args: (items: T[]) => readonly (string | number)[]): Promise<unknown> {
    return this.gatherWith(group, op, keys, item, args);
  }

  private gatherWith<T>(
    group: object,
    op: BatchOp,
    keys: readonly string[],
    item: T,
    args: (items: T[]) => readonly (string | number)[],
    durable?: (how: Durable) => void,
  ): Promise<unknown> {
    return new Promise((resolve, reject) => {
      let g: Gathered | undefined;
      for (const x of this.gathered) if (x.group === group) g = x;
      if (!g) {
        g = { group, op, keys, items: [], args: args as (items: unknown[]) => readonly (string | number)[], waiters: [] };
        this.gathered.push(g);
      }
      g.items.push(item);
      g.waiters.push(durable ? { resolve, reject, durable } : { resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(this.flush);
      }
    });
  }

  private readonly flush = (): void => {
    this.scheduled = false;
    const queue = this.queue;
    this.queue = [];
    if (this.gathered.length > 0) {
      const gathered = this.gathered;
      this.gathered = [];
      for (const g of gathered) {
        let args: readonly (string | number)[];
        try {
          args = g.args(g.items);
        } catch (err) {
          for (const w of g.waiters) {
            w.reject(err as Error);
            w.durable?.('answered');
          }
          continue;
        }
        const waiters = g.waiters;
        let posted = false;
        for (const w of waiters) if (w.durable) posted = true;
        queue.push({
          op: g.op,
          keys: g.keys,
          args,
          resolve: (value) => {
            for (const w of waiters) w.resolve(value);
          },
          reject: (err) => {
            for (const w of waiters) w.reject(err);
          },
          ...(posted
            ? {
                durable: (how: Durable) => {
                  for (const w of waiters) w.durable?.(how);
                },
              }
            : {}),
        });
      }
    }
    if (this.bySlot && queue.length > 1) {
      const slots = new Map<number, Pending[]>();
      for (const p of queue) {
        const slot = p.keys.length > 0 ? keySlot(p.keys[0]!) : 0;
        const group = slots.get(slot);
        if (group) group.push(p);
        else slots.set(slot, [p]);
      }
      for (const group of slots.values()) this.sendAll(group);
      return;
    }
    this.sendAll(queue);
  };

  private sendAll(queue: Pending[]): void {
    for (let i = 0; i < queue.length; i += MAX_OPS) this.send(queue.length <= MAX_OPS ? queue : queue.slice(i, i + MAX_OPS));
  }

  private send(ops: Pending[]): void {
    if (!this.health.usable) {
      const err = new RedisUnavailableError('Redis does not answer');
      for (const p of ops) {
        p.reject(err);
        p.durable?.('answered');
      }
      return;
    }
    const { keys, argv } = encodeBatch(ops);
    this.counts.calls++;
    this.counts.ops += ops.length;
    let posted = false;
    for (const p of ops) if (p.durable) posted = true;
    // Posted operations: is the call in the kernel once made? Only if the socket it goes to is connected and holds
    // nothing in user space before it (else the call would queue behind), and holds nothing after it (ioredis wrote
    // it to the socket synchronously, and the socket handed every byte to the kernel at once: a partial write leaves
    // the rest, and the write's length, in writableLength until the kernel takes it).
    const stream = posted ? this.streamFor(keys[0]) : null;
    const sentBefore = stream !== null && stream.writable && !stream.connecting && stream.writableLength === 0 ? stream.bytesWritten : -1;
    const call = this.health.watch(this.command.svcBatch(keys.length, ...keys, ...argv));
    if (sentBefore >= 0 && stream!.writableLength === 0 && stream!.bytesWritten > sentBefore) {
      this.counts.written++;
      for (const p of ops) p.durable?.('written');
    }
    call.then(
      (out) => {
        for (let i = 0; i < ops.length; i++) {
          const p = ops[i]!;
          // A missing value: nil over RESP2, false over RESP3 (GET and MGET misses alike).
          if (out[2 * i] === 1) p.resolve(p.op === 'M' ? (out[2 * i + 1] as unknown[]).map(nil) : nil(out[2 * i + 1]));
          else p.reject(new ReplyError(String(out[2 * i + 1])));
          p.durable?.('answered');
        }
      },
      (err: Error) => {
        for (const p of ops) {
          p.reject(err);
          p.durable?.('answered');
        }
      },
    );
  }

  /**
   * The socket a call on `key` is written to, if it is known and ready now: the one server's (or Sentinel's master's),
   * or on a Cluster the connection to the master of the key's slot (ioredis writes to it directly when it is ready,
   * else queues the call). Null when the call would be queued (not connected, no slot table yet).
   */
  private streamFor(key: string | undefined): WriteStream | null {
    const redis = this.redis as unknown as ClientInternals;
    if (redis.status !== 'ready') return null;
    if (!this.bySlot) return redis.stream ?? null;
    const cluster = this.redis as unknown as ClusterInternals;
    const nodeKey = cluster.slots?.[key === undefined ? 0 : keySlot(key)]?.[0];
    if (nodeKey === undefined) return null;
    const node = cluster.connectionPool?.getInstanceByKey(nodeKey);
    return node && node.status === 'ready' ? (node.stream ?? null) : null;
  }
}

/** What ioredis keeps on a client (not in its typings): its status and socket. */
type ClientInternals = { status: string; stream?: WriteStream };
/** And on a Cluster: the master of each slot (node keys, the master first) and the connection to each node. */
type ClusterInternals = ClientInternals & {
  slots?: (string[] | undefined)[];
  connectionPool?: { getInstanceByKey(key: string): ClientInternals | undefined };
};

const nil = (v: unknown) => (v === false || v === undefined ? null : v);

const byClient = new WeakMap<object, RedisBatch>();

/** The batch of `redis`, created on first use: every component using the same client shares it (and its calls). */
export function redisBatchOf(redis: Redis): RedisBatch {
  let batch = byClient.get(redis);
  if (!batch) {
    batch = new RedisBatch(redis);
    byClient.set(redis, batch);
  }
  return batch;
}
