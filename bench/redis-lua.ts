/**
 * `node --import tsx bench/redis-lua.ts`: Redis's own time per operation of the hot path's batch script
 * (src/redis/batch.ts BATCH_LUA), from INFO commandstats, against a local Redis (REDIS_URL): the limiter's
 * reservation (L, four buckets), its settlement (force), the budget read (M), the spend add (A), the usage stream's
 * XADD (X), and the five together as one inference sends them. Keys under a throw-away prefix, deleted at the end.
 */
import { Redis } from 'ioredis';
import { BATCH_LUA, encodeBatch, type BatchOp } from '../src/redis/batch-script.ts';

const redis = new Redis(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
const P = `bench-lua-${process.pid}:`;
const sha = (await redis.script('LOAD', BATCH_LUA)) as string;
const OUTCOME = 'x'.repeat(600);

type Op = { op: BatchOp; keys: string[]; args: string[] };

/** The operations of `mix` for request i, of one of `projects` projects (their windows' keys as the limiter names them). */
function ops(mix: string, i: number, projects: number): Op[] {
  const out: Op[] = [];
  const scope = `{prj_01m8f05rxwh7v4jb2mv47cyw${i % projects}}`;
  const limit = (mode: string, cost: number) => {
    const keys = ['cfg', 'k:key_01m8f05s0gqzej5snpkq4q5q8f:r', 'p:r', 'k:key_01m8f05s0gqzej5snpkq4q5q8f:t', 'p:t'].map((s) => `${P}rl:${scope}:${s}`);
    out.push({ op: 'L', keys, args: [`${Date.now()},${mode},100000000,1000000000,100000000,1,r,1,t,${cost},r,1,t,${cost}`] });
  };
  for (const c of mix) {
    if (c === 'L') limit('take', 300);
    if (c === 'F') limit('force', -250);
    if (c === 'M') out.push({ op: 'M', keys: [`${P}spend:a`, `${P}spend:b`], args: [] });
    if (c === 'A') out.push({ op: 'A', keys: [`${P}spend:a`, `${P}spend:b`], args: ['7'] });
    if (c === 'X') out.push({ op: 'X', keys: [`${P}usage`], args: ['o', OUTCOME] });
  }
  return out;
}

/** Redis's time per request (INFO commandstats), and per script call the bytes Redis read and the client's CPU. */
async function measure(mix: string, perCall = 3, projects = 7, calls = 2000): Promise<{ redisUs: number; bytes: number; clientUs: number }> {
  const call = async (i: number) => {
    const all: Op[] = [];
    for (let j = 0; j < perCall; j++) all.push(...ops(mix, i * perCall + j, projects));
    const { keys, argv } = encodeBatch(all);
    await redis.evalsha(sha, keys.length, ...keys, ...argv);
  };
  for (let i = 0; i < 200; i++) await call(i);
  await redis.config('RESETSTAT');
  const cpu = process.cpuUsage();
  for (let i = 0; i < calls; i++) await call(i);
  const used = process.cpuUsage(cpu);
  const stats = await redis.info('stats');
  const line = (await redis.info('commandstats')).split('\n').find((l) => l.startsWith('cmdstat_evalsha:'))!;
  return {
    redisUs: Number(/usec=(\d+)/.exec(line)![1]) / (calls * perCall),
    bytes: Number(/total_net_input_bytes:(\d+)/.exec(stats)![1]) / calls,
    clientUs: (used.user + used.system) / calls,
  };
}

const names: Record<string, string> = {
  L: 'limiter reservation (4 buckets)',
  F: 'limiter settlement (4 buckets)',
  M: 'budget read (MGET of 2)',
  A: 'spend add (2 counters)',
  X: 'usage stream XADD (600 B)',
  LMFAX: 'one inference (all five)',
};
for (const [mix, name] of Object.entries(names)) console.log(`${name}: ${(await measure(mix)).redisUs.toFixed(1)} µs of Redis time`);
// A saturated turn (bench/run.ts): about 18 requests of one project in one call, each side of the provider call.
for (const [mix, name] of [['LM', 'before the provider'], ['FAX', 'after it']] as const) {
  const m = await measure(mix, 18, 1, 1000);
  console.log(
    `a turn of 18 requests of one project, ${name}: ${m.redisUs.toFixed(1)} µs of Redis time per request, ${Math.round(m.bytes)} B per call, ` +
      `${m.clientUs.toFixed(0)} µs of client CPU per call (ioredis and the loop included)`,
  );
}
for await (const keys of redis.scanStream({ match: `${P}*`, count: 500 })) if ((keys as string[]).length > 0) await redis.del(...(keys as string[]));
redis.disconnect();
