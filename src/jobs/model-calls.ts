import type { Deps } from '../deps.ts';
import { PrismaIdempotencyStore, SealedIdempotencyStore, type IdempotencyStore } from '../domain/idempotency/store.ts';
import type { OncePorts } from '../domain/inference/once.ts';
import { RedisIdempotencyStore } from '../redis/idempotency-store.ts';

type ModelCallDeps = Pick<Deps, 'db' | 'redis' | 'config' | 'webhooks' | 'ports' | 'limiter' | 'outcomes'>;

/**
 * What the background work's model calls need to be made at most once (domain/inference/once.ts): the gateway's
 * idempotency store (Redis when configured, else PostgreSQL; sealed with the webhook secret box), and when a usage
 * record is durable. The evaluation runner and the verticals' worker both take theirs from here.
 */
export function oncePorts(deps: ModelCallDeps, idempotency?: IdempotencyStore): OncePorts {
  return {
    inference: deps.ports.inference,
    limiter: deps.limiter,
    idempotency:
      idempotency ??
      new SealedIdempotencyStore(
        deps.redis ? new RedisIdempotencyStore(deps.redis, deps.config.redisPrefix) : new PrismaIdempotencyStore(deps.db),
        deps.webhooks.secretBox,
      ),
    // With Redis the usage-stream entry createInference awaited is durable; without, the in-process batch is written.
    durable: () => (deps.redis ? Promise.resolve() : deps.outcomes.flush({ timeoutMs: 5_000 })),
    routingTimeoutMs: deps.config.routingTimeoutMs,
    outcomeTakeoverMs: deps.redis ? deps.config.outcomeLeaseMs + 3_000 : 0,
  };
}
