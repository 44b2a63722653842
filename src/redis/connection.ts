import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { withRedisTimeout } from './health.ts';

/** The shared client's type, for the composition root and the modules it hands the client to. */
export type { Redis };

/**
 * The shared client. Auto-pipelining: every command issued in one turn of the event loop, by all requests in flight,
 * leaves in one socket write (the hot path's Redis writes were a tenth of the gateway's CPU as one syscall each).
 * No per-command timeout (each would be a timer per command, and one that fires after the event loop was held up
 * blames Redis for an answer already in the socket): a Redis that stops answering (frozen, a dead socket not yet
 * noticed) is found out by the health state's one timer (health.ts, SVC_REDIS_COMMAND_TIMEOUT_MS),
 * which lets go every command waiting on it. Connections that block (the stream consumer) or subscribe (the bus) duplicate it without either.
 */
export async function connectRedis(url: string, log: Logger): Promise<Redis> {
  const redis = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 2,
    connectTimeout: 5_000,
    enableAutoPipelining: true,
    // PING is the health probe (health.ts, /readyz): sent at once, never queued behind a stuck pipeline.
    // svcBatch is the hot path's per-turn script call (batch.ts): batched already, it needs no Pipeline
    // object of ioredis's around it (one per turn, allocated and walked for a single command).
    autoPipeliningIgnoredCommands: ['ping', 'svcBatch'],
  });
  // Errors are the health state's to report (/readyz, "When Redis fails"), not an unhandled event.
  redis.on('error', (err: Error) => log.debug({ err: err.message }, 'redis connection error'));
  try {
    await redis.connect();
    await withRedisTimeout(redis.ping(), 5_000);
  } catch (err) {
    // Started degraded, as if Redis had failed while running: /readyz answers 503 until it answers, and the client
    // keeps reconnecting. A URL that is not a Redis URL at all was refused by the configuration already.
    log.warn({ err: (err as Error).message }, 'REDIS_URL: cannot reach Redis at start; serving degraded until it answers');
  }
  return redis;
}
