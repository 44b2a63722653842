import type { Logger } from 'pino';
import type { Redis } from '../../redis/connection.ts';
import { redisHealthOf, withRedisTimeout } from '../../redis/health.ts';
import { keySlot, SLOTS } from '../../redis/slot.ts';

/**
 * The usage stream's shards (SVC_USAGE_STREAM_SHARDS) and their leases: which keys, which shard a project's outcomes
 * go to, and the pass that renews this consumer's leases, gives back what is over its share and takes free shards.
 * The stream's writer and reader is redis-stream.ts.
 */

export const COMMAND_TIMEOUT_MS = 2_000;

type LeaseCommands = {
  svcLeaseRenew(key: string, owner: string, ms: number): Promise<number>;
  svcLeaseRelease(key: string, owner: string): Promise<number>;
};

/** Renews a lease only if it is still ours (1), else 0: another consumer took the shard. */
const RENEW_LUA = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";
const RELEASE_LUA = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/**
 * One shard of the usage stream: its key, its `:dead` twin (same hash tag, so on a Cluster both live on one master),
 * its lease, and, while this process holds the lease, its consumer (a connection of its own and a read loop).
 */
export interface Shard {
  index: number;
  stream: string;
  lease: string;
  /** The newest entry this process appended to the shard, and the newest one flush() saw written. */
  lastId: string | null;
  flushedUpTo: string | null;
  /** While this process holds the shard's lease. */
  consumer: ShardConsumer | null;
}

export interface ShardConsumer {
  conn: Redis;
  loop: Promise<void>;
  stopped: boolean;
  /** CLIENT ID of the consumer connection, to wake its blocked XREADGROUP (one server only: see unblock()). */
  connId: number | null;
  /** Ends the pause between batches early (a flush() waits on this process's consumer). */
  hurry: (() => void) | null;
  hurried: boolean;
}

/**
 * The shards' stream keys. One shard: `<prefix>usage:outcomes` (the name the stream always had). Several: each with a
 * hash tag picked so that the shards' slots are spread evenly over the 16,384 (on the usual Cluster layout, where each
 * master owns a contiguous range, shards land on every master), `<prefix>usage:outcomes:{u<i>-<n>}`.
 */
export function usageStreamKeys(prefix: string, shards: number): string[] {
  if (shards <= 1) return [`${prefix}usage:outcomes`];
  const keys: string[] = [];
  for (let i = 0; i < shards; i++) {
    const from = Math.floor((i * SLOTS) / shards);
    const to = Math.floor(((i + 1) * SLOTS) / shards);
    let n = 0;
    let tag = `u${i}-0`;
    for (; n < 100_000; n++) {
      tag = `u${i}-${n}`;
      const slot = keySlot(`{${tag}}`);
      if (slot >= from && slot < to) break;
    }
    keys.push(`${prefix}usage:outcomes:{${tag}}`);
  }
  return keys;
}

/** The shard of a project's outcomes (FNV-1a of its id): a project's entries stay in order on one shard. */
export function shardOfProject(projectId: string, shards: number): number {
  if (shards <= 1) return 0;
  let h = 0x811c9dc5;
  for (let i = 0; i < projectId.length; i++) {
    h ^= projectId.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % shards;
}


/** What the lease pass asks of the stream's consumer. */
export interface ShardLeaseHooks {
  stopped(): boolean;
  /** Not stopped nor paused: free shards may be taken. */
  mayTake(): boolean;
  take(s: Shard): void;
  drop(s: Shard, release: boolean): Promise<void>;
}

/**
 * This process's hold on the shards: one pass at a time renews the leases it holds (a lease lost under it stops that
 * shard's consumer), gives back the newest shards over its share (shards / live consumers, rounded up) and takes free
 * ones. Consumers announce themselves in `consumers` (a sorted set scored by when their announcement ends).
 */
export class ShardLeases {
  private leasing: Promise<void> | null = null;

  constructor(
    private readonly redis: Redis,
    private readonly shards: Shard[],
    private readonly consumers: string,
    private readonly consumer: string,
    private readonly leaseMs: number,
    private readonly hooks: ShardLeaseHooks,
    private readonly log: Pick<Logger, 'debug'>,
  ) {
    const r = redis as unknown as Partial<LeaseCommands>;
    if (typeof r.svcLeaseRenew !== 'function') {
      redis.defineCommand('svcLeaseRenew', { lua: RENEW_LUA, numberOfKeys: 1 });
      redis.defineCommand('svcLeaseRelease', { lua: RELEASE_LUA, numberOfKeys: 1 });
    }
  }

  /** Leases are renewed (and free shards looked for) this often: five times per lease, at most once a second. */
  get tickMs(): number {
    return Math.max(100, Math.min(1_000, Math.floor(this.leaseMs / 5)));
  }

  /** One pass over the leases (never two at once): renew ours, give back what is over our share, take free ones. */
  tick(): Promise<void> {
    if (this.leasing) return this.leasing;
    this.leasing = this.leaseOnce()
      .catch((err: unknown) => this.log.debug({ err: (err as Error).message }, 'usage stream leases: Redis error; retrying'))
      .finally(() => {
        this.leasing = null;
      });
    return this.leasing;
  }

  private async leaseOnce(): Promise<void> {
    if (this.hooks.stopped() || !redisHealthOf(this.redis).usable) return;
    const now = Date.now();
    await withRedisTimeout(
      Promise.all([this.redis.zadd(this.consumers, now + this.leaseMs, this.consumer), this.redis.zremrangebyscore(this.consumers, '-inf', now)]),
      COMMAND_TIMEOUT_MS,
    );
    const alive = Math.max(1, await withRedisTimeout(this.redis.zcard(this.consumers), COMMAND_TIMEOUT_MS));
    const share = Math.ceil(this.shards.length / alive);
    const owned = this.shards.filter((s) => s.consumer);
    // Ours still? A lease that expired under us (a long pause) may be another's now: its loop stops.
    const renewed = await Promise.all(
      owned.map((s) => withRedisTimeout((this.redis as unknown as LeaseCommands).svcLeaseRenew(s.lease, this.consumer, this.leaseMs), COMMAND_TIMEOUT_MS).catch(() => -1)),
    );
    let mine = 0;
    for (let i = 0; i < owned.length; i++) {
      if (renewed[i] === 0) await this.hooks.drop(owned[i]!, false);
      else mine++;
    }
    // Over our share (another consumer came): give back the newest ones.
    for (const s of [...this.shards].reverse()) {
      if (mine <= share) break;
      if (!s.consumer) continue;
      await this.hooks.drop(s, true);
      mine--;
    }
    if (!this.hooks.mayTake()) return;
    for (const s of this.shards) {
      if (mine >= share) break;
      if (s.consumer) continue;
      const took = await withRedisTimeout(this.redis.set(s.lease, this.consumer, 'PX', this.leaseMs, 'NX'), COMMAND_TIMEOUT_MS);
      if (took !== 'OK') continue;
      mine++;
      this.hooks.take(s);
    }
  }


  /** Gives a shard's lease back at once (only if it is still ours). */
  release(s: Shard): Promise<unknown> {
    return withRedisTimeout((this.redis as unknown as LeaseCommands).svcLeaseRelease(s.lease, this.consumer), COMMAND_TIMEOUT_MS).catch(() => {});
  }

  /** The pass in flight, if any (close waits for it). */
  settled(): Promise<void> {
    return this.leasing?.catch(() => {}) ?? Promise.resolve();
  }

  /** This consumer leaves the set of live consumers. */
  leave(): Promise<unknown> {
    return withRedisTimeout(this.redis.zrem(this.consumers, this.consumer), COMMAND_TIMEOUT_MS).catch(() => {});
  }
}

/** "<ms>-<seq>" stream ids compared as numbers. */
export function idCompare(a: string, b: string): number {
  const [am, as] = a.split('-').map(BigInt) as [bigint, bigint];
  const [bm, bs] = b.split('-').map(BigInt) as [bigint, bigint];
  return am === bm ? (as === bs ? 0 : as < bs ? -1 : 1) : am < bm ? -1 : 1;
}

/** A stream group's consumers of replicas long gone, with nothing pending: removed so the group does not grow forever. */
export async function forgetDeadConsumers(redis: Redis, stream: string, group: string, self: string, leaseMs: number): Promise<void> {
  const consumers = ((await withRedisTimeout(redis.xinfo('CONSUMERS', stream, group), COMMAND_TIMEOUT_MS)) as unknown[][]).map(pairs);
  for (const c of consumers) {
    if (c.name !== self && Number(c.pending) === 0 && Number(c.idle) > 10 * leaseMs) {
      await redis.xgroup('DELCONSUMER', stream, group, String(c.name));
    }
  }
}

export function pairs(flat: unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[String(flat[i])] = flat[i + 1];
  return out;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref());
}

/**
 * Redis replicates asynchronously: an entry a master acknowledged may not have reached the replica that a failover
 * (Sentinel, Cluster) promotes. The outcomes appended this long before Redis was found down are appended again once
 * it answers; an entry that survived is then in the stream twice and written once (persistOutcomes).
 */
export const AT_RISK_MS = 2_000;

/**
 * One stream entry appended within AT_RISK_MS: its fields (to append again), until a consumer is known to have written
 * it to PostgreSQL (then nothing is at risk and they are let go: RecentAppends.release), and its id once Redis answered.
 */
export interface AtRiskEntry {
  shard: Shard;
  fields: string[] | null;
  id: string | null;
}

/**
 * What was appended within AT_RISK_MS (oldest first from `head`), and what was set aside when Redis went down. An
 * entry's fields are let go as soon as its shard's consumer has written it (release), so under load the strings kept
 * are those of the last few hundred milliseconds, not of AT_RISK_MS.
 */
export class RecentAppends {
  private recent: { at: number; entry: AtRiskEntry }[] = [];
  private head = 0;
  private aside: AtRiskEntry[] = [];
  /** Counts setAside(): a release pass that began before Redis went down lets nothing go after it. */
  generation = 0;

  remember(entry: AtRiskEntry): void {
    const at = performance.now();
    this.recent.push({ at, entry });
    while (this.head < this.recent.length && this.recent[this.head]!.at < at - AT_RISK_MS) this.head++;
    if (this.head > 1_024 && this.head * 2 > this.recent.length) {
      this.recent = this.recent.slice(this.head);
      this.head = 0;
    }
  }

  /** Redis went down: what was appended within AT_RISK_MS and is not known to be written is at risk. */
  setAside(): void {
    this.generation++;
    const since = performance.now() - AT_RISK_MS;
    for (let i = this.head; i < this.recent.length; i++) {
      const { at, entry } = this.recent[i]!;
      if (at >= since && entry.fields !== null) this.aside.push(entry);
    }
    this.recent = [];
    this.head = 0;
  }

  takeSetAside(): AtRiskEntry[] {
    const out = this.aside;
    this.aside = [];
    return out;
  }

  /** Per shard, the newest id among the entries remembered before `before` (performance.now()) that still hold their fields. */
  releasable(before: number): Map<Shard, string> {
    const out = new Map<Shard, string>();
    for (let i = this.head; i < this.recent.length && this.recent[i]!.at < before; i++) {
      const { entry } = this.recent[i]!;
      if (entry.fields === null || entry.id === null) continue;
      const newest = out.get(entry.shard);
      if (newest === undefined || idCompare(entry.id, newest) > 0) out.set(entry.shard, entry.id);
    }
    return out;
  }

  /** A consumer wrote the shard's entries up to `id`: their fields are let go. How many were. */
  release(shard: Shard, id: string): number {
    let released = 0;
    for (let i = this.head; i < this.recent.length; i++) {
      const { entry } = this.recent[i]!;
      if (entry.shard === shard && entry.fields !== null && entry.id !== null && idCompare(entry.id, id) <= 0) {
        entry.fields = null;
        released++;
      }
    }
    return released;
  }
}

/**
 * True when no entry up to `id` of `stream` is left undelivered or delivered-but-unwritten in `group` (any replica's).
 * `goneIsWritten`: whether a stream that does not exist counts as written (flush(): nothing is left to write), or not
 * (letting go of at-risk entries: a failover may have lost the stream with them).
 */
export async function writtenUpTo(redis: Redis, stream: string, group: string, id: string, goneIsWritten = true): Promise<boolean> {
  try {
    const [groups, pending] = await withRedisTimeout(
      Promise.all([
        redis.xinfo('GROUPS', stream) as Promise<unknown[][]>,
        redis.xpending(stream, group) as Promise<[number, string | null, string | null, unknown]>,
      ]),
      COMMAND_TIMEOUT_MS,
    );
    const info = groups.map(pairs).find((g) => g.name === group);
    // The consumer has not created its group yet: nothing was read.
    if (!info) return false;
    const delivered = String(info['last-delivered-id']);
    if (idCompare(delivered, id) < 0) return false;
    return Number(pending[0]) === 0 || pending[1] === null || idCompare(pending[1], id) > 0;
  } catch (err) {
    // The stream is gone (XINFO: "ERR no such key"): nothing is left to write. No group yet (XPENDING: "NOGROUP No such
    // key … or consumer group"): nothing was read yet. Anything else (Redis not answering): try again.
    const message = (err as Error).message;
    return goneIsWritten && !/^NOGROUP/.test(message) && /no such key/i.test(message);
  }
}
