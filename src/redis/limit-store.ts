import type { Redis } from './connection.ts';
import { redisBatchOf, type Posted, type RedisBatch } from './batch.ts';
import type { ApplyRequest, ApplyResult, BucketOutcome, LimitStore, VersionedLimits } from '../limits/store.ts';

const MAX_MEMO_KEYS = 100_000;

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
 * (batch.ts, `L`): no other request, from this replica or another, slips in between the check and the take.
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
  /** Windows are applied as an operation of the shared batch (batch.ts: the same script, one call per turn). */
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

  /**
   * The keys of a scope's windows, made once: every inference names the same five. Bounded: past MAX_MEMO_KEYS the
   * memo starts again (the keys are made anew as they are used).
   */
  private readonly memo = new Map<string, Map<string, string>>();
  private memoSize = 0;

  private memoKey(scope: string, suffix: string): string {
    let keys = this.memo.get(scope);
    if (!keys) {
      if (this.memoSize > MAX_MEMO_KEYS) {
        this.memo.clear();
        this.memoSize = 0;
      }
      keys = new Map();
      this.memo.set(scope, keys);
    }
    let key = keys.get(suffix);
    if (key === undefined) {
      key = this.key(scope, suffix);
      keys.set(suffix, key);
      this.memoSize++;
    }
    return key;
  }

  /** The limits' part of the packed argument, made once per limits object (the limiter's cache hands out the same one). */
  private readonly limitsText = new WeakMap<VersionedLimits, string>();

  async apply(req: ApplyRequest): Promise<ApplyResult> {
    const { keys, packed } = this.encode(req);
    return this.decode(req, await this.batch.run<string>('L', keys, [packed]));
  }

  /**
   * apply() as a posted operation of the batch (batch.ts): `durable` once the call is in the kernel's socket buffer,
   * Redis's answer in `answer` after. For a settlement (mode force, never refused) whose answer the response need not
   * wait for.
   */
  post(req: ApplyRequest): Posted<ApplyResult> {
    const { keys, packed } = this.encode(req);
    const posted = this.batch.post<string>('L', keys, [packed]);
    const answer = posted.answer.then((out) => this.decode(req, out));
    answer.catch(() => {});
    return { durable: posted.durable, answer };
  }

  private encode(req: ApplyRequest): { keys: string[]; packed: string } {
    const l = req.limits;
    const buckets = req.buckets;
    const keys: string[] = new Array(buckets.length + 1);
    keys[0] = this.memoKey(req.scope, 'cfg');
    let limits = this.limitsText.get(l);
    if (limits === undefined) {
      limits = `${l.requestsPerMinute},${l.tokensPerMinute},${l.burst},${l.version}`;
      this.limitsText.set(l, limits);
    }
    // One argument (BATCH_LUA's `L`): every argument of a command is encoded, sent and parsed on its own.
    let packed = `${req.nowMs},${req.mode},${limits}`;
    for (let i = 0; i < buckets.length; i++) {
      const b = buckets[i]!;
      keys[i + 1] = this.memoKey(req.scope, b.id);
      // An own window (an end customer's) names its rate and version in its kind: R<rate>v<version>, T<rate>v<version>.
      if (b.own) packed += `,${b.resource === 'requests' ? 'R' : 'T'}${b.own.perMinute}v${b.own.version},${Math.trunc(b.cost)}`;
      else packed += b.resource === 'requests' ? `,r,${Math.trunc(b.cost)}` : `,t,${Math.trunc(b.cost)}`;
    }
    return { keys, packed };
  }

  private decode(req: ApplyRequest, answer: string): ApplyResult {
    const l = req.limits;
    const buckets = req.buckets;
    const out = answer.split(',');
    const outcomes: BucketOutcome[] = new Array(buckets.length);
    for (let i = 0; i < buckets.length; i++) outcomes[i] = { used: Number(out[5 + 2 * i]), applied: Number(out[6 + 2 * i]) };
    const rpm = Number(out[1]);
    const tpm = Number(out[2]);
    const burst = Number(out[3]);
    const version = Number(out[4]);
    const same = rpm === l.requestsPerMinute && tpm === l.tokensPerMinute && burst === l.burst && version === l.version;
    return { allowed: out[0] === '1', limits: same ? l : { requestsPerMinute: rpm, tokensPerMinute: tpm, burst, version }, buckets: outcomes };
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
