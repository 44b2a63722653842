import { Cluster, Redis as RedisServer, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import type { RedisConnectionConfig } from '../config/config.ts';
import { withRedisTimeout } from './health.ts';

/**
 * The shared client's type, for the composition root and the modules it hands the client to: one server (REDIS_URL,
 * also behind Sentinel) or a Redis Cluster (REDIS_CLUSTER_NODES). Both take the same commands; what differs (slots,
 * sharded pub/sub, the blocking and subscriber connections) is asked of isCluster() and made by duplicateRedis().
 */
export type Redis = RedisServer | Cluster;
export { Cluster, RedisServer };

export function isCluster(redis: Redis): redis is Cluster {
  return redis instanceof Cluster;
}

/** The variable that configured Redis, for log lines and errors (CONTRACT §1: name the variable). */
export function redisVariable(config: RedisConnectionConfig): string {
  return config.mode === 'single' ? 'REDIS_URL' : config.mode === 'cluster' ? 'REDIS_CLUSTER_NODES' : 'REDIS_SENTINELS';
}

/**
 * The options of every shared client. Auto-pipelining: every command issued in one turn of the event loop, by all
 * requests in flight, leaves in one socket write per server (the hot path's Redis writes were a tenth of the gateway's
 * CPU as one syscall each). No per-command timeout (each would be a timer per command, and one that fires after the
 * event loop was held up blames Redis for an answer already in the socket): a Redis that stops answering is found out
 * by the health state's one timer (health.ts, SVC_REDIS_COMMAND_TIMEOUT_MS), which lets go every command waiting on it.
 */
const SHARED: RedisOptions = {
  lazyConnect: true,
  maxRetriesPerRequest: 2,
  connectTimeout: 5_000,
  enableAutoPipelining: true,
  // PING is the health probe (health.ts, /readyz): sent at once, never queued behind a stuck pipeline.
  // svcBatch is the hot path's per-turn script call (batch.ts): batched already, it needs no Pipeline
  // object of ioredis's around it (one per turn, allocated and walked for a single command).
  autoPipeliningIgnoredCommands: ['ping', 'svcBatch'],
};

/** A demoted master answers writes with READONLY (Sentinel failover): reconnect (to the new master) and resend. */
const followPromotion = (err: Error) => (/^READONLY\b/.test(err.message) ? 2 : false);

/** The one place a Redis client is made (one server, Sentinel or Cluster); not connected yet. */
export function createRedis(config: RedisConnectionConfig): Redis {
  switch (config.mode) {
    case 'single':
      return new RedisServer(config.url, SHARED);
    case 'sentinel':
      return new RedisServer({
        ...SHARED,
        sentinels: config.sentinels,
        name: config.name,
        role: 'master',
        // Subscribes to the Sentinels' +switch-master: a promoted replica is followed at once, not at the next error.
        failoverDetector: true,
        reconnectOnError: followPromotion,
        sentinelRetryStrategy: (times: number) => Math.min(100 * times, 1_000),
      });
    case 'cluster':
      return new Cluster(config.nodes, clusterOptions({ enableAutoPipelining: true, autoPipeliningIgnoredCommands: SHARED.autoPipeliningIgnoredCommands }));
  }
}

function clusterOptions(extra: ClusterOptions): ClusterOptions {
  return {
    lazyConnect: true,
    // Reads and writes go to masters: a replica may lag, and the limiter's windows must be read where they are written.
    scaleReads: 'master',
    maxRedirections: 16,
    retryDelayOnFailover: 100,
    retryDelayOnClusterDown: 100,
    retryDelayOnTryAgain: 100,
    slotsRefreshTimeout: 1_000,
    clusterRetryStrategy: (times: number) => Math.min(100 * times, 1_000),
    redisOptions: { connectTimeout: 5_000, maxRetriesPerRequest: 2, reconnectOnError: followPromotion },
    ...extra,
  };
}

/**
 * A connection of its own beside the shared client: `blocking` for a command that holds its connection (the usage
 * stream consumer's XREADGROUP BLOCK), `subscriber` for pub/sub (on a Cluster: sharded, SSUBSCRIBE, one subscriber per
 * master). Neither auto-pipelines nor gives up on queued commands; `lazy`: it connects with its first command.
 */
export function duplicateRedis(redis: Redis, purpose: 'blocking' | 'subscriber', opts: { lazy?: boolean } = {}): Redis {
  const lazyConnect = opts.lazy ?? purpose === 'blocking';
  if (isCluster(redis)) {
    return redis.duplicate([], {
      lazyConnect,
      enableAutoPipelining: false,
      shardedSubscribers: purpose === 'subscriber',
      redisOptions: { ...redis.options.redisOptions, maxRetriesPerRequest: null, commandTimeout: undefined },
    });
  }
  return redis.duplicate({ lazyConnect, maxRetriesPerRequest: null, enableAutoPipelining: false, commandTimeout: undefined });
}

/**
 * Opens the shared client. Started degraded if Redis does not answer, as if it had failed while running: /readyz
 * answers 503 until it answers, and the client keeps reconnecting. A configuration that is not Redis at all was
 * refused by the configuration already.
 */
export async function connectRedis(config: RedisConnectionConfig | string, log: Logger): Promise<Redis> {
  const c: RedisConnectionConfig = typeof config === 'string' ? { mode: 'single', url: config } : config;
  const redis = createRedis(c);
  // Errors are the health state's to report (/readyz, "When Redis fails"), not an unhandled event.
  redis.on('error', (err: Error) => log.debug({ err: err.message }, 'redis connection error'));
  if (isCluster(redis)) redis.on('node error', (err: Error, node: string) => log.debug({ err: err.message, node }, 'redis cluster node error'));
  try {
    await withRedisTimeout(redis.connect(), 10_000);
    await withRedisTimeout(redis.ping(), 5_000);
  } catch (err) {
    log.warn({ err: (err as Error).message }, `${redisVariable(c)}: cannot reach Redis at start; serving degraded until it answers`);
  }
  return redis;
}
