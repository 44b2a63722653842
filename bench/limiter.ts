/**
 * Limiter micro-benchmark (npm run bench:limiter): what the rate limiter adds to each request.
 *
 * Measures Limiter.takeRequest (the per-request hook: all four windows of a key and its project) and a token
 * reserve + settle pair (inference), against Redis when REDIS_URL is set and against the in-process store, one call
 * at a time (latency added to an idle request) and 64 in flight (under load). Redis commands are counted on the
 * client, so "round trips per request" is measured, not assumed. Limits are cached as in steady state.
 *
 *   REDIS_URL=redis://127.0.0.1:6379 npm run bench:limiter [-- --n 20000]
 */
import { Redis } from 'ioredis';
import pino from 'pino';
import type { Limiter } from '../src/limits/index.ts';
import { createLimiter } from '../src/redis/limiter.ts';

const args = process.argv.slice(2);
const N = Number(args[args.indexOf('--n') + 1]) || 20_000;
const REDIS_URL = process.env.REDIS_URL || null;
const KEYS = 200;
const PROJECTS = 20;
const limits = { requestsPerMinute: 1_000_000_000, tokensPerMinute: 1_000_000_000, burst: 0, version: 0 };

interface Row {
  store: string;
  operation: string;
  concurrency: number;
  calls: number;
  p50_us: number;
  p99_us: number;
  mean_us: number;
  calls_per_s: number;
  redis_commands_per_call: number | null;
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

async function measure(
  store: string,
  operation: string,
  concurrency: number,
  limiter: Limiter,
  op: (i: number) => Promise<unknown>,
  commands: () => number,
): Promise<Row> {
  for (let i = 0; i < 2_000; i++) await op(i); // warm up: JIT, script load, limits cache
  const durations = new Array<number>(N);
  const before = commands();
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < N; i = next++) {
        const t0 = performance.now();
        await op(i);
        durations[i] = (performance.now() - t0) * 1000;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  const sorted = [...durations].sort((a, b) => a - b);
  void limiter;
  return {
    store,
    operation,
    concurrency,
    calls: N,
    p50_us: Math.round(pct(sorted, 50)),
    p99_us: Math.round(pct(sorted, 99)),
    mean_us: Math.round(durations.reduce((a, b) => a + b, 0) / N),
    calls_per_s: Math.round(N / elapsed),
    redis_commands_per_call: store === 'redis' ? Number(((commands() - before) / N).toFixed(3)) : null,
  };
}

async function run(store: 'redis' | 'memory'): Promise<Row[]> {
  let redis: Redis | null = null;
  let sent = 0;
  if (store === 'redis') {
    redis = new Redis(REDIS_URL!, { maxRetriesPerRequest: 2 });
    await redis.ping();
    const original = redis.sendCommand.bind(redis);
    redis.sendCommand = ((...a: unknown[]) => {
      sent++;
      return (original as (...x: unknown[]) => unknown)(...a);
    }) as typeof redis.sendCommand;
  }
  const prefix = `bench_${Date.now().toString(36)}:`;
  const limiter = createLimiter({
    redis,
    redisPrefix: prefix,
    log: pino({ level: 'silent' }),
    loadLimits: async () => limits,
    operatorRequestsPerMinute: 6000,
  });
  const owner = (i: number) => ({ kind: 'key' as const, keyId: `key_${i % KEYS}`, projectId: `prj_${i % PROJECTS}` });
  const now = () => Date.now();
  const rows: Row[] = [];
  for (const concurrency of [1, 64]) {
    rows.push(await measure(store, 'takeRequest (4 windows)', concurrency, limiter, (i) => limiter.takeRequest(owner(i), now()), () => sent));
    rows.push(
      await measure(
        store,
        'reserve + settle tokens',
        concurrency,
        limiter,
        async (i) => {
          const d = await limiter.takeTokens(owner(i), now(), 300);
          await limiter.adjustTokens(owner(i), now(), -Math.max(...d.applied) + 120);
        },
        () => sent,
      ),
    );
  }
  if (redis) {
    // Remove the bench's keys.
    let cursor = '0';
    do {
      const [nextCursor, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = nextCursor;
      if (keys.length) await redis.del(...keys);
    } while (cursor !== '0');
    redis.disconnect();
  }
  return rows;
}

const rows = [...(REDIS_URL ? await run('redis') : []), ...(await run('memory'))];
if (!REDIS_URL) process.stdout.write('REDIS_URL is not set: only the in-process store was measured.\n');
process.stdout.write(
  '\n| store | operation | in flight | p50 µs | p99 µs | mean µs | calls/s | Redis commands/call |\n|---|---|---|---|---|---|---|---|\n' +
    rows
      .map(
        (r) =>
          `| ${r.store} | ${r.operation} | ${r.concurrency} | ${r.p50_us} | ${r.p99_us} | ${r.mean_us} | ${r.calls_per_s} | ${r.redis_commands_per_call ?? '-'} |`,
      )
      .join('\n') +
    '\n',
);
process.stdout.write(`\n${JSON.stringify({ n: N, node: process.version, rows })}\n`);
