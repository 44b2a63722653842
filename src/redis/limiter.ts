import type { Redis } from './connection.ts';
import type { Logger } from 'pino';
import { Limiter } from '../limits/limiter.ts';
import type { VersionedLimits } from '../limits/store.ts';
import { MemoryLimitStore } from '../limits/limiter.ts';
import type { Bus } from '../pubsub/bus.ts';
import { FallbackLimitStore } from './fallback-limit-store.ts';
import { RedisLimitStore } from './limit-store.ts';

export interface CreateLimiterOptions {
  redis: Redis | null;
  redisPrefix: string;
  log: Logger;
  bus?: Bus;
  loadLimits: (projectId: string) => Promise<VersionedLimits>;
  /** The operator key's own request window (it has no project). */
  operatorRequestsPerMinute: number;
}

/** Redis with the in-process fallback when REDIS_URL is set; else the in-process store alone. */
export function createLimiter(opts: CreateLimiterOptions): Limiter {
  const operatorLimits = { requestsPerMinute: opts.operatorRequestsPerMinute, tokensPerMinute: 1, burst: 0, version: 0 };
  if (!opts.redis) {
    return new Limiter({ store: new MemoryLimitStore(), kind: 'memory', loadLimits: opts.loadLimits, operatorLimits, bus: opts.bus });
  }
  const store = new FallbackLimitStore(new RedisLimitStore(opts.redis, opts.redisPrefix), opts.redis, opts.log);
  return new Limiter({
    store,
    kind: 'redis',
    health: () => store.health(),
    loadLimits: opts.loadLimits,
    operatorLimits,
    bus: opts.bus,
  });
}
