/**
 * `node --import tsx bench/redis-lua.ts`: Redis's own time per operation of the hot path's batch script
 * (src/limits/redis-batch.ts BATCH_LUA), from INFO commandstats, against a local Redis (REDIS_URL): the limiter's
 * reservation (L, four buckets), its settlement (force), the budget read (M), the spend add (A), the usage stream's
 * XADD (X), and the five together as one inference sends them. Keys under a throw-away prefix, deleted at the end.
 */
import { Redis } from 'ioredis';
import { BATCH_LUA } from '../src/limits/redis-batch.ts';

const redis = new Redis(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
const P = `bench-lua-${process.pid}:`;
const sha = (await redis.script('LOAD', BATCH_LUA)) as string;
const OUTCOME = 'x'.repeat(600);

function ops(mix: string, i: number): { keys: string[]; argv: string[] } {
  const keys: string[] = [];
  const argv: string[] = [];
  const scope = `{prj_${i % 7}}`;
  const limit = (mode: string, cost: number) => {
    const ks = ['cfg', 'key:r', 'key:t', 'project:r', 'project:t'].map((s) => `${P}rl:${scope}:${s}`);
    argv.push(`L${ks.length},1`, `${Date.now()},${mode},100000000,1000000000,100000000,1,r,1,t,${cost},r,1,t,${cost}`);
    keys.push(...ks);
  };
  for (const c of mix) {
    if (c === 'L') limit('take', 300);
    if (c === 'F') limit('force', -250);
    if (c === 'M') {
      argv.push('M2,0');
      keys.push(`${P}spend:a`, `${P}spend:b`);
    }
    if (c === 'A') {
      argv.push('A2,1', '7');
      keys.push(`${P}spend:a`, `${P}spend:b`);
    }
    if (c === 'X') {
      argv.push('X1,2', 'o', OUTCOME);
      keys.push(`${P}usage`);
    }
  }
  return { keys, argv };
}

async function measure(mix: string, perCall = 3, calls = 2000): Promise<number> {
  const call = async (i: number) => {
    const keys: string[] = [];
    const argv: string[] = [];
    for (let j = 0; j < perCall; j++) {
      const o = ops(mix, i * perCall + j);
      keys.push(...o.keys);
      argv.push(...o.argv);
    }
    await redis.evalsha(sha, keys.length, ...keys, ...argv);
  };
  for (let i = 0; i < 200; i++) await call(i);
  await redis.config('RESETSTAT');
  for (let i = 0; i < calls; i++) await call(i);
  const line = (await redis.info('commandstats')).split('\n').find((l) => l.startsWith('cmdstat_evalsha:'))!;
  return Number(/usec=(\d+)/.exec(line)![1]) / (calls * perCall);
}

const names: Record<string, string> = {
  L: 'limiter reservation (4 buckets)',
  F: 'limiter settlement (4 buckets)',
  M: 'budget read (MGET of 2)',
  A: 'spend add (2 counters)',
  X: 'usage stream XADD (600 B)',
  LMFAX: 'one inference (all five)',
};
for (const [mix, name] of Object.entries(names)) console.log(`${name}: ${(await measure(mix)).toFixed(1)} µs of Redis time`);
for await (const keys of redis.scanStream({ match: `${P}*`, count: 500 })) if ((keys as string[]).length > 0) await redis.del(...(keys as string[]));
redis.disconnect();
