import { duplicateRedis, isCluster, type Redis } from './connection.ts';
import type { Logger } from 'pino';
import type { Bus, BusHandler } from '../pubsub/bus.ts';
import { redisHealthOf } from './health.ts';

/**
 * The bus over Redis pub/sub: publishes on the shared client, listens on a dedicated subscriber connection. On a
 * Redis Cluster, sharded pub/sub (SPUBLISH / SSUBSCRIBE): a message goes to the shard that owns the channel's slot
 * only, not to every node of the cluster, and the subscriber keeps one connection per master (ioredis's sharded
 * subscribers), following a failover.
 */
export class RedisBus implements Bus {
  private readonly subscriber: Redis;
  private readonly handlers = new Map<string, BusHandler[]>();
  private readonly resync: (() => void)[] = [];
  private connectedOnce = false;
  private readonly sharded: boolean;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly log: Logger,
  ) {
    this.sharded = isCluster(redis);
    this.subscriber = duplicateRedis(redis, 'subscriber', { lazy: false });
    const deliver = (channel: string, message: string) => {
      for (const h of this.handlers.get(channel) ?? []) h(message);
    };
    this.subscriber.on(this.sharded ? 'smessage' : 'message', deliver);
    this.subscriber.on(this.sharded ? 'subscribersReady' : 'ready', () => {
      if (this.connectedOnce) for (const r of this.resync) r();
      this.connectedOnce = true;
    });
    this.subscriber.on('error', (err: Error) => log.debug({ err: err.message }, 'pub/sub connection error'));
  }

  /**
   * Never throws, and never waits for a Redis known not to answer (health.ts): the change it announces has
   * committed, and this replica has already evicted it. While Redis is down the other replicas do not hear it; they
   * drop their caches when their subscriber reconnects, and otherwise re-read a key row within a minute (the key
   * cache's TTL) and a project within its TTL (README "When Redis fails").
   */
  async publish(channel: string, message: string): Promise<void> {
    const health = redisHealthOf(this.redis);
    try {
      if (!health.usable) throw new Error('Redis does not answer');
      await health.watch(this.sharded ? this.redis.spublish(this.prefix + channel, message) : this.redis.publish(this.prefix + channel, message));
    } catch (err) {
      this.log.warn({ err: (err as Error).message, channel }, 'could not tell the other replicas of a change (pub/sub); they pick it up by their cache TTLs');
    }
  }

  subscribe(channel: string, handler: BusHandler): void {
    const full = this.prefix + channel;
    const list = this.handlers.get(full);
    if (list) list.push(handler);
    else {
      this.handlers.set(full, [handler]);
      void (this.sharded ? this.subscriber.ssubscribe(full) : this.subscriber.subscribe(full)).catch((err: Error) =>
        this.log.warn({ err: err.message, channel }, 'could not subscribe to a pub/sub channel'),
      );
    }
  }

  onResync(handler: () => void): void {
    this.resync.push(handler);
  }

  async close(): Promise<void> {
    this.subscriber.disconnect();
  }
}
