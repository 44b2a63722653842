import type { Socket } from 'node:net';
import { ReplyError } from 'ioredis';
import { isCluster, type Redis } from './connection.ts';
import { redisHealthOf, RedisUnavailableError, type RedisHealth } from './health.ts';
import { keySlot } from './slot.ts';

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
export const BATCH_LUA = `
local SCALE = 60000

-- Each operation gets its keys as a list (ks), picked out of KEYS by the indices in its header.

-- L: the rate limiter (redis/limit-store.ts; MemoryLimitStore.apply is the same arithmetic).
-- keys: cfg, then one per bucket. ARGV: ONE string, comma-separated: now, mode, rpm, tpm, burst, version, then per
-- bucket: kind, cost (one argument instead of 6 + 2 per bucket: each argument is encoded, sent and parsed apart).
-- kind: r (requests) or t (tokens) under the scope's limits, or R<rate>v<version> / T<rate>v<version>: a window of
-- its own (an end customer's), capacity and refill <rate> a minute, fresh when last written under another version.
-- Returns one string, comma-separated: allowed, rpm, tpm, burst, version, then per bucket: used, applied.
local function limit(ks, a)
  local p = {}
  for x in string.gmatch(ARGV[a], '[^,]+') do p[#p + 1] = x end
  local now = tonumber(p[1])
  local force = p[2] == 'force'
  local rpm, tpm, burst, ver = tonumber(p[3]), tonumber(p[4]), tonumber(p[5]), tonumber(p[6])
  local cfg = redis.call('HMGET', ks[1], 'rpm', 'tpm', 'burst', 'v')
  local published = tonumber(cfg[4])
  if published and published >= ver then
    rpm, tpm, burst, ver = tonumber(cfg[1]), tonumber(cfg[2]), tonumber(cfg[3]), published
  elseif ver > 0 then
    redis.call('HSET', ks[1], 'rpm', p[3], 'tpm', p[4], 'burst', p[5], 'v', p[6])
  end
  local n = #ks - 1
  local used, cost, cap, rate, last, bver = {}, {}, {}, {}, {}, {}
  local allowed = 1
  for i = 1, n do
    local kind = p[5 + 2 * i]
    local c = tonumber(p[6 + 2 * i])
    bver[i] = ver
    if kind == 'r' then cap[i] = (rpm + burst) * SCALE; rate[i] = rpm
    elseif kind == 't' then cap[i] = tpm * SCALE; rate[i] = tpm
    else
      local _, orate, over = string.match(kind, '^(%a)(%d+)v(%d+)$')
      rate[i] = tonumber(orate); cap[i] = rate[i] * SCALE; bver[i] = tonumber(over)
    end
    local s = redis.call('HMGET', ks[1 + i], 'u', 't', 'v')
    local u, t = 0, now
    if s[1] and tonumber(s[3]) == bver[i] then
      u, t = tonumber(s[1]), tonumber(s[2])
      if now > t then
        u = math.max(0, u - (now - t) * rate[i])
        t = now
      end
    end
    if not force then
      if c > cap[i] / SCALE then c = cap[i] / SCALE end
      if c > 0 and u + c * SCALE > cap[i] then allowed = 0 end
    end
    used[i], cost[i], last[i] = u, c, t
  end
  local out = { tostring(allowed), p[3], p[4], p[5], p[6] }
  if published and published >= ver then
    out[2], out[3], out[4], out[5] = cfg[1], cfg[2], cfg[3], cfg[4]
  end
  for i = 1, n do
    local u = used[i]
    if allowed == 1 and cost[i] ~= 0 then
      u = math.max(0, u + cost[i] * SCALE)
      if u == 0 then
        redis.call('DEL', ks[1 + i])
      else
        redis.call('HSET', ks[1 + i], 'u', string.format('%.0f', u), 't', string.format('%.0f', last[i]), 'v', string.format('%.0f', bver[i]))
        redis.call('PEXPIRE', ks[1 + i], math.ceil(u / rate[i]) + 60000)
      end
    end
    out[4 + 2 * i] = string.format('%.0f', u)
    out[5 + 2 * i] = string.format('%.0f', cost[i])
  end
  return table.concat(out, ',')
end

-- A: INCRBY ARGV[a] on each counter that exists (budget counters; missing ones stay missing).
local function add(ks, a)
  for i = 1, #ks do
    if redis.call('EXISTS', ks[i]) == 1 then redis.call('INCRBY', ks[i], ARGV[a]) end
  end
  return 0
end

local OPS = {
  L = limit,
  A = add,
  M = function(ks) return redis.call('MGET', unpack(ks)) end,
  G = function(ks) return redis.call('GET', ks[1]) end,
  S = function(ks, a) return redis.call('SET', ks[1], ARGV[a], 'EX', ARGV[a + 1]) end,
  X = function(ks, a, na) return redis.call('XADD', ks[1], '*', unpack(ARGV, a, a + na - 1)) end,
}

-- ARGV: per operation one header "<code><argument count>" then ",<index in KEYS>" per key (e.g. "L1,1,2,3,4,5"), then
-- its arguments; KEYS: every key of the call once, in order of first use (the requests of a turn share a project's
-- windows: each key is sent and parsed once per call, not once per operation). Returns per operation: 1 and the
-- result, or 0 and the error message.
local out = {}
local a = 1
local op = 0
while a <= #ARGV do
  local code, na, rest = string.match(ARGV[a], '^(%a)(%d+)(.*)$')
  na = tonumber(na)
  local ks = {}
  for i in string.gmatch(rest, '%d+') do ks[#ks + 1] = KEYS[tonumber(i)] end
  a = a + 1
  local ok, res = pcall(OPS[code], ks, a, na)
  op = op + 1
  if ok then
    out[2 * op - 1] = 1
    out[2 * op] = res or false
  else
    out[2 * op - 1] = 0
    out[2 * op] = type(res) == 'table' and (res.err or 'error') or tostring(res)
  end
  a = a + na
end
return out
`;

/** L: limiter, A: counters add, M: MGET, G: GET, S: SET … EX, X: XADD … * (see BATCH_LUA). */
export type BatchOp = 'L' | 'A' | 'M' | 'G' | 'S' | 'X';

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

/**
 * The script call's KEYS and ARGV for `ops` (BATCH_LUA's format): each distinct key once, in order of first use, and
 * per operation its header (code, argument count, the 1-based indices of its keys in KEYS), then its arguments.
 */
export function encodeBatch(ops: readonly { op: BatchOp; keys: readonly string[]; args: readonly (string | number)[] }[]): {
  keys: string[];
  argv: (string | number)[];
} {
  const keys: string[] = [];
  const index = new Map<string, number>();
  const argv: (string | number)[] = [];
  for (const p of ops) {
    let header = `${p.op}${p.args.length}`;
    for (const k of p.keys) {
      let i = index.get(k);
      if (i === undefined) {
        i = keys.push(k);
        index.set(k, i);
      }
      header += `,${i}`;
    }
    argv.push(header);
    for (const a of p.args) argv.push(a);
  }
  return { keys, argv };
}

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
