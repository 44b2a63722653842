import { Cluster, ReplyError } from 'ioredis';

/** What the health state needs of a client (one server, Sentinel or Cluster; tests hand in a stand-in). */
export interface HealthClient {
  readonly status: string;
  ping(): Promise<unknown>;
  on(event: string, listener: (...args: any[]) => void): unknown;
}
import type { Logger } from 'pino';
import { InFlight } from '../kernel/in-flight.ts';

/**
 * Whether the shared Redis client answers: ONE state per client, consulted by everything that uses it on the request
 * path (the hot path's batch of operations, the limiter's fallback, the idempotency store, the response cache, the
 * spend counters, the outcome writer's XADD, /readyz). A frozen Redis (socket open, nothing answers) is found out by
 * the first watched command that stays unanswered for `commandTimeoutMs` (SVC_REDIS_COMMAND_TIMEOUT_MS); without this
 * state every request would pay that once per round trip.
 *
 * - Timeout: ONE timer for the client (not a timer and a Promise.race per command): while watched commands are in
 *   flight, a sweep every quarter of the timeout looks at the oldest. One older than the timeout is judged after the
 *   turn's I/O has been read (setImmediate): when the event loop itself was held up (a long GC, a starved CPU), the
 *   timers run before the socket is read, and an answer already waiting there must not count as Redis not answering.
 * - Down: a command failed without Redis answering (the timeout above, a closed connection; a ReplyError is Redis
 *   answering, so it is not an outage), or the connection is not `ready` (ioredis reconnecting). While down, `usable`
 *   is false at once and callers take their degraded path without sending anything. Commands still waiting when Redis
 *   is found down are let go at that moment (watch() rejects them) rather than each at its own timeout.
 * - Up again: a PING answers (a probe), or ioredis reconnects (`ready`). Probes are started by `usable` itself, at most
 *   one every `probeIntervalMs` and never waited for by the request that starts it, and by /readyz (check()). The
 *   sweep runs only while something is watched and never keeps the process up; tests drive ages with an injected
 *   monotonic clock.
 */
export class RedisHealth {
  private down = false;
  /** Why Redis is down (the error that took it down, or the last probe's): /readyz names it. */
  private why: string | null = null;
  private lastProbeAt = -Infinity;
  private probing: Promise<boolean> | null = null;
  private readonly listeners: (() => void)[] = [];
  private readonly downListeners: (() => void)[] = [];
  /** The commands being watched, oldest first: rejected when Redis is found down (a list, not a Set: kernel/in-flight.ts). */
  private readonly waiting = new InFlight<{ at: number; reject: (err: Error) => void }>();
  private sweeper: NodeJS.Timeout | null = null;
  private readonly commandTimeoutMs: number | null;
  private readonly now: () => number;
  private readonly probeIntervalMs: number;
  private readonly probeTimeoutMs: number;
  private readonly log: Logger | undefined;

  constructor(
    private readonly redis: HealthClient,
    opts: RedisHealthOptions = {},
  ) {
    this.now = opts.monotonicNow ?? (() => performance.now());
    this.probeIntervalMs = opts.probeIntervalMs ?? PROBE_INTERVAL_MS;
    this.probeTimeoutMs = opts.probeTimeoutMs ?? Math.min(PROBE_TIMEOUT_MS, opts.commandTimeoutMs ?? PROBE_TIMEOUT_MS);
    this.log = opts.log;
    this.commandTimeoutMs = opts.commandTimeoutMs ?? null;
    // The connection dropped (ioredis reconnects in the background): what waits on it is let go now.
    redis.on('reconnecting', () => this.report(new Error('the connection to Redis was lost; reconnecting')));
    // A new connection answered ioredis's ready check: whatever was wrong with the old one is gone. On a Cluster,
    // `ready` says one node answered, not that every slot has a master: the probe asks the cluster itself.
    // Behind Sentinel, a reconnect may land on a demoted master: the probe asks its ROLE.
    redis.on('ready', () => ((redis as unknown) instanceof Cluster || isSentinelClient(redis) ? void this.probe() : this.up()));
  }

  /** Why Redis is down (null while it answers), e.g. "CLUSTERDOWN The cluster is down". */
  get reason(): string | null {
    return this.down ? this.why : this.redis.status === 'ready' ? null : `the connection to Redis is ${this.redis.status}`;
  }

  /** True when commands may be sent. While down, starts a probe when one is due (without waiting for it). */
  get usable(): boolean {
    if (this.redis.status !== 'ready') return false;
    if (!this.down) return true;
    if (!this.probing && this.now() - this.lastProbeAt >= this.probeIntervalMs) void this.probe();
    return false;
  }

  /**
   * A command failed: an outage unless Redis itself answered with an error of the command (isRedisOutage: a cluster
   * or failover error such as CLUSTERDOWN, CROSSSLOT or READONLY is an outage although Redis answered it).
   */
  report(err: unknown): void {
    if (!isRedisOutage(err)) return;
    const message = err instanceof Error ? err.message : String(err);
    if (this.down) {
      // Still down: the newest cause is the one to show (the log line stays the first one: it must not flap).
      this.why = message;
      return;
    }
    this.down = true;
    this.why = message;
    // The command that just failed was the probe: the next one is due an interval from now.
    this.lastProbeAt = this.now();
    this.log?.error(
      { err: message },
      'Redis does not answer: requests skip it (per-replica rate limits, no response cache, Idempotency-Key refused, ' +
        'usage written directly) until a PING answers again',
    );
    const released = new RedisUnavailableError(`Redis does not answer (${message})`);
    for (const w of this.waiting.drain()) w.reject(released);
    for (const fn of this.downListeners) {
      try {
        fn();
      } catch (err) {
        this.log?.error({ err }, 'a Redis outage listener failed');
      }
    }
  }

  /**
   * `command`'s outcome, reporting its failure; rejected with RedisUnavailableError as soon as Redis is found down
   * (by this command or any other), so that no caller waits for a Redis already known not to answer.
   */
  watch<T>(command: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.down) {
        // Sent while down (a race with the check): its answer, if any, comes too late to matter.
        command.catch(() => {});
        reject(new RedisUnavailableError('Redis does not answer'));
        return;
      }
      const entry = this.waiting.add({ at: this.now(), reject });
      if (this.sweeper === null && this.commandTimeoutMs !== null) this.armSweeper(this.commandTimeoutMs);
      command.then(
        (value) => {
          this.waiting.delete(entry);
          resolve(value);
        },
        (err: unknown) => {
          this.waiting.delete(entry);
          this.report(err);
          reject(err);
        },
      );
    });
  }

  private armSweeper(timeoutMs: number): void {
    this.sweeper = setInterval(() => {
      const oldest = this.waiting.oldest();
      if (oldest === undefined) {
        clearInterval(this.sweeper!);
        this.sweeper = null;
        return;
      }
      if (this.now() - oldest.at < timeoutMs) return;
      // Judged after this turn's I/O is read: an answer that arrived while the event loop was held up is not a timeout.
      setImmediate(() => {
        if (this.waiting.oldest() === oldest) this.report(new Error(`Redis did not answer within ${timeoutMs} ms (command timed out)`));
      });
    }, Math.max(5, Math.floor(timeoutMs / 4)));
    this.sweeper.unref();
  }

  /** For /readyz: whether Redis answers a PING now (shares the probe in flight, if any). */
  async check(): Promise<boolean> {
    if (this.redis.status !== 'ready') return false;
    return this.probe();
  }

  /** Runs `fn` each time Redis is found down (e.g. to set aside acknowledged writes a failover may lose). */
  onDown(fn: () => void): void {
    this.downListeners.push(fn);
  }

  /** Runs `fn` each time Redis is found answering again after being down (e.g. to apply writes it missed). */
  onRecovered(fn: () => void): void {
    this.listeners.push(fn);
  }

  private probe(): Promise<boolean> {
    if (this.probing) return this.probing;
    this.lastProbeAt = this.now();
    const answers =
      (this.redis as unknown) instanceof Cluster
        ? clusterAnswers(this.redis as unknown as Cluster)
        : isSentinelClient(this.redis)
          ? masterAnswers(this.redis as unknown as SentinelClient)
          : this.redis.ping();
    const probing = withRedisTimeout(answers, this.probeTimeoutMs)
      .then(
        () => {
          this.up();
          return true;
        },
        (err: unknown) => {
          this.report(err);
          return false;
        },
      )
      .finally(() => {
        this.probing = null;
      });
    this.probing = probing;
    return probing;
  }

  private up(): void {
    if (!this.down) return;
    this.down = false;
    this.why = null;
    this.log?.warn('Redis answers again: requests use it again');
    for (const fn of this.listeners) {
      try {
        fn();
      } catch (err) {
        this.log?.error({ err }, 'a Redis recovery listener failed');
      }
    }
  }
}

/**
 * ReplyErrors that are not about the command but about where it was sent: the cluster has slots without a master
 * (CLUSTERDOWN), a batch spans slots (CROSSSLOT: a bug of ours, but one that no retry on this Redis mends), the master
 * lost its replicas or was demoted (MASTERDOWN, NOREPLICAS, READONLY), Redis is loading or resharding (LOADING,
 * TRYAGAIN, MOVED/ASK that the client gave up following), or Sentinel names no master. Each is an outage of Redis.
 */
const OUTAGE_REPLY = /^(?:CLUSTERDOWN|CROSSSLOT|MASTERDOWN|NOREPLICAS|READONLY|LOADING|TRYAGAIN|MOVED|ASK|MISCONF)\b|no master|failover/i;

/** Whether `err` means Redis (as a service) is not usable: no answer at all, or one of OUTAGE_REPLY's answers. */
export function isRedisOutage(err: unknown): boolean {
  if (err instanceof ReplyError) return OUTAGE_REPLY.test((err as Error).message);
  return true;
}

/**
 * A Cluster answers when it says so (CLUSTER INFO: cluster_state:ok, asked of a master) and every master it routes to
 * answers a PING: a node that answers PING while its cluster is down must not end an outage (the log would flap
 * between "does not answer" and "answers again" at every probe). A master that does not answer makes the client
 * refresh its slots, so that a promoted replica is routed to from the next probe on.
 */
async function clusterAnswers(cluster: Cluster): Promise<void> {
  const masters = cluster.nodes('master');
  if (masters.length === 0) throw new Error('no master: the cluster client knows no master node');
  // The cluster's own word, from the first master that answers, connected ones first (a dead one is named by the PINGs below).
  const ordered = [...masters.filter((m) => m.status === 'ready'), ...masters.filter((m) => m.status !== 'ready')];
  let info: string | null = null;
  let unreachable: unknown = null;
  for (let i = 0; i < ordered.length && info === null; i++) {
    try {
      info = String(await ordered[i]!.call('CLUSTER', 'INFO'));
    } catch (err) {
      unreachable = err;
    }
  }
  if (info === null) throw unreachable;
  const state = /cluster_state:(\w+)/.exec(info)?.[1];
  if (state !== 'ok') throw new ReplyError(`CLUSTERDOWN cluster_state:${state ?? 'unknown'}`);
  try {
    await Promise.all(masters.map((m) => m.ping()));
  } catch (err: unknown) {
    (cluster as unknown as { refreshSlotsCache(cb?: () => void): void }).refreshSlotsCache(() => {});
    throw new Error(`a master of the cluster does not answer (${(err as Error).message})`);
  }
}

/**
 * `reason` as /readyz shows it to anyone: the cluster's or Redis's own error code and words (CLUSTERDOWN, CROSSSLOT, …),
 * or what kind of failure it was; never an address or a message of a library's (the log has the whole message).
 */
export function publicReason(reason: string): string {
  const code = /^(CLUSTERDOWN|CROSSSLOT|MASTERDOWN|NOREPLICAS|READONLY|LOADING|TRYAGAIN|MOVED|ASK|MISCONF)\b[^\n]*/.exec(reason);
  if (code) return code[0].replace(/\d+\.\d+\.\d+\.\d+:\d+|\[[0-9a-f:]+\]:\d+/gi, '…').slice(0, 200);
  if (/no master/i.test(reason)) return 'no master: Sentinel or the cluster names no master';
  if (/master of the cluster does not answer/.test(reason)) return 'a master of the cluster does not answer';
  if (/timed out|did not answer within/i.test(reason)) return 'Redis did not answer in time';
  if (/closed|reconnect|ECONNREFUSED|ECONNRESET|connect|sentinel/i.test(reason)) return 'the connection to Redis is lost';
  return 'Redis does not answer';
}

type SentinelClient = { options: { sentinels?: unknown[] }; call(...args: string[]): Promise<unknown>; disconnect(reconnect?: boolean): void };

function isSentinelClient(redis: unknown): boolean {
  return Array.isArray((redis as Partial<SentinelClient>).options?.sentinels) && ((redis as SentinelClient).options.sentinels?.length ?? 0) > 0;
}

/**
 * Behind Sentinel, Redis answers when the server the client is connected to is a master (ROLE): after a failover the
 * old master answers PING as a replica, and every write there fails (READONLY). Connected to a replica, the client is
 * made to reconnect, asking the Sentinels for the master anew.
 */
async function masterAnswers(redis: SentinelClient): Promise<void> {
  const role = (await redis.call('ROLE')) as unknown[];
  if (role[0] !== 'master') {
    redis.disconnect(true);
    throw new ReplyError('READONLY the server is a replica now (a failover); reconnecting to the master the Sentinels name');
  }
}

/** A command given up on because Redis is known not to answer. */
export class RedisUnavailableError extends Error {
  override readonly name = 'RedisUnavailableError';
}

export interface RedisHealthOptions {
  log?: Logger;
  /** A watched command not answered by then takes Redis down (SVC_REDIS_COMMAND_TIMEOUT_MS); none: no sweep. */
  commandTimeoutMs?: number;
  monotonicNow?: () => number;
  probeIntervalMs?: number;
  probeTimeoutMs?: number;
}

/** While down, a PING at most this often (started by the requests that find Redis down, or by /readyz). */
export const PROBE_INTERVAL_MS = 250;
/**
 * A PING not answered by then (or within the command timeout, if shorter) counts as "still down" (the shared client
 * sends PING outside its auto-pipeline, so a probe never waits behind a stuck pipeline: see connection.ts).
 */
const PROBE_TIMEOUT_MS = 1_000;

const byClient = new WeakMap<object, RedisHealth>();

/**
 * The health state of `redis`, created on first use: every component holding the same client shares one state, so
 * one failed command takes all of them off Redis at once. createDeps creates it first, with the process logger.
 */
export function redisHealthOf(redis: HealthClient, opts?: RedisHealthOptions): RedisHealth {
  let health = byClient.get(redis);
  if (!health) {
    health = new RedisHealth(redis, opts);
    byClient.set(redis, health);
  }
  return health;
}

/** `promise`, or a rejection once `ms` have passed without an answer from Redis (the timer never keeps the process up). */
export function withRedisTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Redis did not answer within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
