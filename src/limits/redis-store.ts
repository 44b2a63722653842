import type { Redis } from 'ioredis';
import { redisBatchOf, type RedisBatch } from './redis-batch.ts';
import type { ApplyRequest, ApplyResult, LimitStore, VersionedLimits } from './types.ts';

/** Publishes limits only if they are newer than what the scope already holds (two updates may race). */
const PUBLISH_LUA = `
local v = tonumber(redis.call('HGET', KEYS[1], 'v'))
if v and v >= tonumber(ARGV[4]) then return 0 end
redis.call('HSET', KEYS[1], 'rpm', ARGV[1], 'tpm', ARGV[2], 'burst', ARGV[3], 'v', ARGV[4])
return 1
`;

type LimitCommands = {
  svcRateLimitPublish(key: string, ...args: (string | number)[]): Promise<number>;
};

/**
 * Every window of a call (the key's and the project's requests and tokens) in one Lua operation of the shared batch
 * (redis-batch.ts, `L`): no other request, from this replica or another, slips in between the check and the take.
 * The script is loaded once and called by SHA (ioredis defineCommand: EVALSHA, EVAL only after a NOSCRIPT). Every key
 * carries the scope's hash tag `{prj_…}`, so a project's windows live in one slot.
 *
 * KEYS      the scope's published limits (hash rpm, tpm, burst, v), then one bucket per window: hash u (used, scaled
 *           units), t (last update, ms), v (limits version)
 * ARGV      one string, comma-separated: now_ms, mode ("take" | "force"), rpm, tpm, burst, version, then per bucket:
 *           kind ("r" | "t"), cost
 * Returns   one string, comma-separated: allowed, rpm, tpm, burst, version, then per bucket: used, applied (numbers as
 *           text: Lua numbers would be truncated to integers on the way out, and %.0f keeps integers above 1e14 exact).
 *
 * Mirrors MemoryLimitStore.apply line for line; the shared test suite holds both to the same numbers.
 */
export class RedisLimitStore implements LimitStore {
  private readonly commands: LimitCommands;
  /** Windows are applied as an operation of the shared batch (redis-batch.ts: the same script, one call per turn). */
  private readonly batch: RedisBatch;

  constructor(
    readonly redis: Redis,
    private readonly prefix: string,
  ) {
    const r = redis as unknown as Partial<LimitCommands>;
    this.batch = redisBatchOf(redis);
    if (typeof r.svcRateLimitPublish !== 'function') {
      redis.defineCommand('svcRateLimitPublish', { lua: PUBLISH_LUA, numberOfKeys: 1 });
    }
    this.commands = redis as unknown as LimitCommands;
  }

  /** `<prefix>rl:{<scope>}:<suffix>`: the braces are the Cluster hash tag. */
  key(scope: string, suffix: string): string {
    return `${this.prefix}rl:{${scope}}:${suffix}`;
  }

  async apply(req: ApplyRequest): Promise<ApplyResult> {
    const keys = [this.key(req.scope, 'cfg')];
    const l = req.limits;
    // One argument (BATCH_LUA's `L`): every argument of a command is encoded, sent and parsed on its own.
    let packed = `${req.nowMs},${req.mode},${l.requestsPerMinute},${l.tokensPerMinute},${l.burst},${l.version}`;
    for (const b of req.buckets) {
      keys.push(this.key(req.scope, b.id));
      packed += `,${b.resource === 'requests' ? 'r' : 't'},${Math.trunc(b.cost)}`;
    }
    const out = (await this.batch.run<string>('L', keys, [packed])).split(',');
    const num = (i: number) => Number(out[i]);
    return {
      allowed: out[0] === '1',
      limits: { requestsPerMinute: num(1), tokensPerMinute: num(2), burst: num(3), version: num(4) },
      buckets: req.buckets.map((_, i) => ({ used: num(5 + 2 * i), applied: num(6 + 2 * i) })),
    };
  }

  async publish(scope: string, limits: VersionedLimits): Promise<void> {
    await this.commands.svcRateLimitPublish(
      this.key(scope, 'cfg'),
      limits.requestsPerMinute,
      limits.tokensPerMinute,
      limits.burst,
      limits.version,
    );
  }
}
