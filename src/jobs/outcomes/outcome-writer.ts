import type { OutcomeQueue } from '../../domain/usage/ports.ts';
import type { Redis } from '../../redis/connection.ts';
import type { OutcomeWriterOptions } from './batch-writer.ts';
import { MemoryOutcomeWriter } from './memory-queue.ts';
import { RedisOutcomeWriter } from './redis-stream.ts';

/**
 * Usage records and inference.completed events, written off the request path in batches, durably.
 *
 * With Redis (RedisOutcomeWriter, redis-stream.ts): the request path appends the outcome to a Redis stream (XADD,
 * issued together with the limiter's settle command in one script call) and answers once that call is in the kernel's
 * socket buffer, which a kill -9 of the gateway does not take back (redis/batch.ts post()): that is the write-ahead log.
 * An entry Redis refuses or does not acknowledge after that is written directly to PostgreSQL (in the background). A background consumer per replica (its own connection, consumer group `writers`) reads batches
 * (XREADGROUP COUNT/BLOCK), writes each in ONE PostgreSQL transaction (persist-outcomes.ts: idempotent, so an entry read
 * twice is written once), then XACK + XDEL. Entries a dead replica had read but not written are taken over by the others
 * (XAUTOCLAIM) once idle for the lease. A crash of the gateway loses nothing it had written to Redis's socket.
 *
 * Without Redis (MemoryOutcomeWriter, memory-queue.ts): a bounded in-process batch, flushed every
 * SVC_OUTCOME_FLUSH_MS (20 ms) or at BATCH_SIZE outcomes. SIGTERM flushes it; a crash (kill -9, power loss) loses what was accepted since the last
 * commit: at most one flush interval of outcomes plus the batch being written (more while PostgreSQL is unreachable,
 * up to MAX_BUFFERED), which is the documented worst case.
 *
 * Either way, when the fast path cannot take an outcome (Redis down, buffer full) it is written directly in its own
 * transaction, on the request path, so that nothing is dropped for lack of a queue.
 *
 * The stream is sharded by project (SVC_USAGE_STREAM_SHARDS; on a Redis Cluster the shards spread over the masters),
 * and each shard is read by the one consumer holding its lease (redis-stream.ts).
 */
/**
 * consume false (SVC_ROLE=api): this process only appends to the stream; the worker processes' consumers write it.
 * Needs Redis (config.ts refuses the role without it).
 */
export function createOutcomeWriter(
  opts: OutcomeWriterOptions & { redis: Redis | null; redisPrefix: string; leaseMs: number; consume: boolean; shards?: number },
): OutcomeQueue {
  if (!opts.redis) return new MemoryOutcomeWriter(opts);
  const writer = new RedisOutcomeWriter(opts, opts.redis, opts.redisPrefix, opts.leaseMs, opts.shards ?? 1);
  if (opts.consume) writer.start();
  return writer;
}
