import type { Redis } from 'ioredis';
import type { ApplyRequest, ApplyResult, LimitStore, VersionedLimits } from './types.ts';

/**
 * One Lua script for every window of a call (the key's and the project's requests and tokens): one round trip, and no
 * other request, from this replica or another, slips in between the check and the take. Loaded once and called by
 * SHA (ioredis defineCommand: EVALSHA, EVAL only after a NOSCRIPT). Every key carries the scope's hash tag
 * `{prj_…}`, so all of them live in one slot and the script runs unchanged on Redis Cluster.
 *
 * KEYS[1]   the scope's published limits: hash rpm, tpm, burst, v
 * KEYS[2..] one bucket per window: hash u (used, scaled units), t (last update, ms), v (limits version)
 * ARGV      now_ms, mode ("take" | "force"), rpm, tpm, burst, version, then per bucket: kind ("r" | "t"), cost
 * Returns   allowed, rpm, tpm, burst, version, then per bucket: used, applied (all as strings: Lua numbers would be
 *           truncated to integers on the way out, and %.0f keeps integers above 1e14 exact).
 *
 * Mirrors MemoryLimitStore.apply line for line; the shared test suite holds both to the same numbers.
 */
export const RATE_LIMIT_LUA = `
local now = tonumber(ARGV[1])
local force = ARGV[2] == 'force'
local rpm, tpm, burst, ver = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local SCALE = 60000

local cfg = redis.call('HMGET', KEYS[1], 'rpm', 'tpm', 'burst', 'v')
local published = tonumber(cfg[4])
if published and published >= ver then
  rpm, tpm, burst, ver = tonumber(cfg[1]), tonumber(cfg[2]), tonumber(cfg[3]), published
elseif ver > 0 then
  -- The caller read newer limits from the database than Redis holds (a lost publish): heal it.
  redis.call('HSET', KEYS[1], 'rpm', ARGV[3], 'tpm', ARGV[4], 'burst', ARGV[5], 'v', ARGV[6])
end

local n = #KEYS - 1
local used, cost, cap, rate, last = {}, {}, {}, {}, {}
local allowed = 1
for i = 1, n do
  local kind = ARGV[5 + 2 * i]
  local c = tonumber(ARGV[6 + 2 * i])
  if kind == 'r' then cap[i] = (rpm + burst) * SCALE; rate[i] = rpm else cap[i] = tpm * SCALE; rate[i] = tpm end
  local s = redis.call('HMGET', KEYS[i + 1], 'u', 't', 'v')
  local u, t = 0, now
  if s[1] and tonumber(s[3]) == ver then
    u, t = tonumber(s[1]), tonumber(s[2])
    -- A replica whose clock is behind refills nothing and never moves the bucket's time backwards.
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

local out = { tostring(allowed), ARGV[3], ARGV[4], ARGV[5], ARGV[6] }
if published and published >= ver then
  out[2], out[3], out[4], out[5] = cfg[1], cfg[2], cfg[3], cfg[4]
end
for i = 1, n do
  local u = used[i]
  if allowed == 1 and cost[i] ~= 0 then
    u = math.max(0, u + cost[i] * SCALE)
    if u == 0 then
      redis.call('DEL', KEYS[i + 1])
    else
      local us = string.format('%.0f', u)
      redis.call('HSET', KEYS[i + 1], 'u', us, 't', string.format('%.0f', last[i]), 'v', string.format('%.0f', ver))
      -- Gone once refilled (a missing bucket is a full one), with a minute of slack for clock skew between replicas.
      redis.call('PEXPIRE', KEYS[i + 1], math.ceil(u / rate[i]) + 60000)
    end
  end
  out[4 + 2 * i] = string.format('%.0f', u)
  out[5 + 2 * i] = string.format('%.0f', cost[i])
end
return out
`;

/** Publishes limits only if they are newer than what the scope already holds (two updates may race). */
const PUBLISH_LUA = `
local v = tonumber(redis.call('HGET', KEYS[1], 'v'))
if v and v >= tonumber(ARGV[4]) then return 0 end
redis.call('HSET', KEYS[1], 'rpm', ARGV[1], 'tpm', ARGV[2], 'burst', ARGV[3], 'v', ARGV[4])
return 1
`;

type LimitCommands = {
  svcRateLimit(numKeys: number, ...args: (string | number)[]): Promise<string[]>;
  svcRateLimitPublish(key: string, ...args: (string | number)[]): Promise<number>;
};

export class RedisLimitStore implements LimitStore {
  private readonly commands: LimitCommands;

  constructor(
    readonly redis: Redis,
    private readonly prefix: string,
  ) {
    const r = redis as unknown as Partial<LimitCommands>;
    if (typeof r.svcRateLimit !== 'function') redis.defineCommand('svcRateLimit', { lua: RATE_LIMIT_LUA });
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
    const keys = [this.key(req.scope, 'cfg'), ...req.buckets.map((b) => this.key(req.scope, b.id))];
    const l = req.limits;
    const args: (string | number)[] = [req.nowMs, req.mode, l.requestsPerMinute, l.tokensPerMinute, l.burst, l.version];
    for (const b of req.buckets) args.push(b.resource === 'requests' ? 'r' : 't', Math.trunc(b.cost));
    const out = await this.commands.svcRateLimit(keys.length, ...keys, ...args);
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
