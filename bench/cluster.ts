/**
 * The api's CPU per inference on a Redis Cluster (3 masters + 3 replicas) beside one Redis server, in the same run:
 * `node --import tsx bench/cluster.ts`. For each mode an api and a worker process (`node --import tsx src/main.ts`,
 * SVC_ROLE api / worker) on one PostgreSQL, a project whose limits never bind, and an open-loop load at
 * BENCH_CLUSTER_RATE inferences/s (300) for BENCH_CLUSTER_S seconds (10) per round; the modes alternate for
 * BENCH_CLUSTER_ROUNDS rounds (3), so that the machine's other load falls on both. Reports the api's CPU µs per
 * inference (utime + stime from /proc), the latency, and the Redis script calls (EVALSHA) per inference counted by
 * INFO COMMANDSTATS on the masters (one server: the server).
 *
 * Env: DATABASE_URL (local default), REDIS_URL (the single server; default redis://127.0.0.1:6379).
 */
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import { seedProject } from '../test/helpers/app.ts';
import { startGateway, type GatewayProcess } from '../test/helpers/gateway-process.ts';
import { startMockOpenAI } from '../test/helpers/mock-openai.ts';
import { openServices } from '../test/helpers/private-services.ts';
import { RedisClusterEngine } from '../test/helpers/redis-engines.ts';
import { cpuUs } from './gateway.ts';

process.env.DATABASE_URL ||= 'postgresql://postgres@127.0.0.1:5432/postgres';
process.env.REDIS_URL ||= 'redis://127.0.0.1:6379';
const RATE = Number(process.env.BENCH_CLUSTER_RATE ?? 300);
const SECONDS = Number(process.env.BENCH_CLUSTER_S ?? 10);
const ROUNDS = Number(process.env.BENCH_CLUSTER_ROUNDS ?? 3);

async function evalsha(ports: number[]): Promise<number> {
  let total = 0;
  for (const port of ports) {
    const r = new Redis({ host: '127.0.0.1', port });
    total += Number(/cmdstat_evalsha:calls=(\d+)/.exec(await r.info('commandstats'))?.[1] ?? 0);
    r.disconnect();
  }
  return total;
}

interface Mode {
  name: string;
  api: GatewayProcess;
  body: string;
  secret: string;
  masters: () => Promise<number[]>;
}

async function main(): Promise<void> {
  const services = await openServices();
  const cluster = await RedisClusterEngine.start();
  const mock = await startMockOpenAI();
  const providersFile = path.join(tmpdir(), `svc-bench-cluster-${process.pid}.json`);
  writeFileSync(
    providersFile,
    JSON.stringify({ providers: [{ name: 'local', kind: 'openai', base_url: mock.url, region: 'local', models: [{ id: 'bench-model', input_per_mtok: 1, output_per_mtok: 2 }] }] }),
  );
  const procs: GatewayProcess[] = [];
  try {
    const base = { DATABASE_URL: services.databaseUrl, SVC_PROVIDERS_FILE: providersFile, SVC_ENCRYPTION_KEY: '11'.repeat(32) };
    const single = { ...base, REDIS_URL: services.redisUrl, SVC_REDIS_PREFIX: services.redisPrefix };
    const onCluster = { ...base, REDIS_CLUSTER_NODES: cluster.seeds, SVC_REDIS_PREFIX: 'bench:' };
    const singlePort = Number(new URL(services.redisUrl).port || 6379);
    const modes: Mode[] = [];
    for (const [name, env, masters] of [
      ['one Redis server', single, async () => [singlePort]],
      ['Redis Cluster (3 masters + 3 replicas)', onCluster, async () => (await cluster.masters()).map((m) => m.port)],
    ] as const) {
      const [api, worker] = await Promise.all([startGateway({ ...env, SVC_ROLE: 'api' }), startGateway({ ...env, SVC_ROLE: 'worker' })]);
      procs.push(api, worker);
      const s = await seedProject(api, {
        plan: 'enterprise',
        limits: { requests_per_minute: 100_000_000, tokens_per_minute: 1_000_000_000, burst: 100_000_000 },
        scopes: ['inference:write'],
      });
      modes.push({ name, api, secret: s.secret, body: JSON.stringify({ model: 'bench-model', project_id: s.projectId, messages: [{ role: 'user', content: 'ping' }] }), masters });
    }
    const load = (m: Mode, seconds: number) =>
      autocannon({
        url: `${m.api.baseUrl}/v1/inference`,
        method: 'POST',
        headers: { authorization: `Bearer ${m.secret}`, 'content-type': 'application/json' },
        body: m.body,
        connections: 32,
        overallRate: RATE,
        duration: seconds,
      });
    for (const m of modes) await load(m, 5); // warm-up (JIT, pools)
    const rows: Record<string, { us: number[]; p50: number[]; p99: number[]; evalsha: number[]; non2xx: number }> = {};
    for (let round = 0; round < ROUNDS; round++) {
      for (const m of round % 2 ? [...modes].reverse() : modes) {
        const ports = await m.masters();
        const [cpu0, e0] = [cpuUs(m.api.pid), await evalsha(ports)];
        const r = await load(m, SECONDS);
        const [cpu1, e1] = [cpuUs(m.api.pid), await evalsha(ports)];
        const n = r.requests.total;
        const row = (rows[m.name] ??= { us: [], p50: [], p99: [], evalsha: [], non2xx: 0 });
        row.us.push((cpu1 - cpu0) / n);
        row.p50.push(r.latency.p50);
        row.p99.push(r.latency.p99);
        // The worker's scripts (leases) are a few per second: left in, they are a rounding error at this rate.
        row.evalsha.push((e1 - e0) / n);
        row.non2xx += r.non2xx + r.errors;
      }
    }
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const ref = med(rows[modes[0]!.name]!.us);
    console.log(`\n${RATE} inferences/s offered, ${ROUNDS} rounds of ${SECONDS} s per mode, medians:\n`);
    console.log('| Redis | api CPU µs per inference | vs one server | p50 ms | p99 ms | EVALSHA per inference | non-2xx |');
    console.log('|---|---|---|---|---|---|---|');
    for (const [name, r] of Object.entries(rows)) {
      console.log(
        `| ${name} | ${Math.round(med(r.us))} (${r.us.map(Math.round).join(', ')}) | ${((med(r.us) / ref - 1) * 100).toFixed(1)}% | ${med(r.p50)} | ${med(r.p99)} | ${med(r.evalsha).toFixed(2)} | ${r.non2xx} |`,
      );
    }
  } finally {
    await Promise.all(procs.map((p) => p.stop('SIGTERM')));
    await mock.close();
    await cluster.stop();
    await services.close();
    rmSync(providersFile, { force: true });
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
