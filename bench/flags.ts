/**
 * `node --import tsx bench/flags.ts`: which Node flags `npm start` should run with, measured on each Node of
 * BENCH_NODES (bench/nodes.ts; default the machine's and 24). For every Node and flag set: an api and a worker process
 * (compiled, as `npm start` runs them) on PostgreSQL (a fresh schema) and a Redis server of the bench's own, in front
 * of the bench's zero-latency mock provider; wrk at BENCH_CONNECTIONS (50) connections for BENCH_FLAGS_S (10) seconds
 * after as long a warm-up, then one connection (sequential) for half as long. Reports the api's CPU µs per uncached
 * inference (/proc), its GC time per request (its /metrics), its highest RSS during the load (sampled every 250 ms, as
 * the bench does), the part of its CPU in threads other than the main one (V8's compiler and GC helpers, libuv's
 * pool: /proc/<pid>/task), req/s, and the sequential p50/p99. Then the embedded default on the same flags (one process, both
 * roles, PGlite in a new data directory, no Redis): its CPU µs per inference and highest RSS under the same load.
 * Flag sets alternate within a round and BENCH_FLAGS_ROUNDS (2) rounds run, so the machine's other load falls on all.
 *
 * BENCH_FLAG_SETS: `;`-separated flag sets (a set's flags separated by spaces; `-` for none) instead of the defaults.
 * BENCH_FLAGS_EMBEDDED=0: the api only.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { cpuUs, freePort, rssMb, startCompiledGateway, startScript, stopChild, waitHttp, withBenchServices } from './gateway.ts';
import { benchNodes } from './nodes.ts';
import { wrk, wrkAvailable } from './wrk.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tmp = path.join(root, 'bench', 'tmp');
const DATABASE_URL = process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/postgres';
const SECONDS = Number(process.env.BENCH_FLAGS_S ?? 10);
const ROUNDS = Number(process.env.BENCH_FLAGS_ROUNDS ?? 2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const MASTER = `svc_sk_bench_${randomBytes(16).toString('hex')}`;
const EMBEDDED = process.env.BENCH_FLAGS_EMBEDDED !== '0';
/** By default: `npm start`'s flags and the young generation and WebAssembly compilers around them. */
const FLAG_SETS: string[][] = process.env.BENCH_FLAG_SETS
  ? process.env.BENCH_FLAG_SETS.split(';').map((s) => (s.trim() === '-' ? [] : s.trim().split(/\s+/)))
  : [
      startScript(root).tokens,
      ['--max-old-space-size=192', '--max-semi-space-size=16', '--min-semi-space-size=16'],
      ['--max-old-space-size=192', '--max-semi-space-size=16', '--min-semi-space-size=16', '--liftoff-only'],
      ['--max-old-space-size=192', '--max-semi-space-size=8', '--min-semi-space-size=8', '--liftoff-only'],
    ].filter((set, i, all) => all.findIndex((x) => x.join(' ') === set.join(' ')) === i);

/** Samples a process's RSS every 250 ms until stop(), which returns the highest (MB). */
function rssSampler(pid: number): { stop(): number } {
  let peak = rssMb(pid);
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, rssMb(pid));
    } catch {}
  }, 250);
  return {
    stop: () => {
      clearInterval(timer);
      return peak;
    },
  };
}

const api = async (base: string, method: string, route: string, body: object, key = MASTER) =>
  (await (await fetch(`${base}${route}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })).json()) as Record<string, string>;

/** A project whose limits do not bind and a key on it: the inference request wrk sends. */
async function inferenceTarget(base: string): Promise<{ url: string; headers: Record<string, string>; body: string }> {
  const project = await api(base, 'POST', '/v1/projects', { name: 'flags', plan: 'enterprise' });
  await api(base, 'PUT', `/v1/projects/${project.id}/rate-limits`, { requests_per_minute: 100_000_000, tokens_per_minute: 1_000_000_000, burst: 100_000_000 });
  const k = await api(base, 'POST', '/v1/keys', { project_id: project.id, name: 'flags', scopes: ['inference:write'] });
  return {
    url: `${base}/v1/inference`,
    headers: { authorization: `Bearer ${k.secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'bench-model', project_id: project.id, messages: [{ role: 'user', content: 'ping' }] }),
  };
}

/** CPU µs of a process's threads other than the main one (V8's compiler and GC helpers, libuv's pool): the whole less the main thread's. */
const otherThreadsUs = (pid: number) => cpuUs(pid) - cpuUs(pid, pid);

async function metrics(base: string): Promise<string> {
  const res = await request(`${base}/metrics`, { headers: { authorization: `Bearer ${MASTER}` } });
  return res.body.text();
}
/** GC seconds (all kinds) and counts by kind: the counts do not depend on how busy the machine is, the seconds do. */
const gcReading = async (base: string) => {
  const text = await metrics(base);
  const seconds = [...text.matchAll(/^nodejs_gc_duration_seconds_sum\{kind="\w+"\} (\S+)$/gm)].reduce((a, m) => a + Number(m[1]), 0);
  const counts: Record<string, number> = {};
  for (const m of text.matchAll(/^nodejs_gc_duration_seconds_count\{kind="(\w+)"\} (\S+)$/gm)) counts[m[1]!] = Number(m[2]);
  return { seconds, counts };
};
/** V8's heap in use and its size (MB), from prom-client's gauges. */
const heapMb = async (base: string) => {
  const text = await metrics(base);
  const mb = (name: string) => Math.round(Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]) / 2 ** 20);
  return `${mb('nodejs_heap_size_used_bytes')}/${mb('nodejs_heap_size_total_bytes')}`;
};

async function main(): Promise<void> {
  if (!wrkAvailable()) throw new Error('bench/flags.ts needs wrk (Debian: apt-get install -y wrk)');
  mkdirSync(tmp, { recursive: true });
  startScript(root); // the start script is readable
  const nodes = benchNodes();
  const rows: Record<string, { node: string; flags: string; api_us: number[]; threads_us: number[]; worker_us: number[]; gc_us: number[]; gcs: string[]; rss_mb: number[]; heap: string[]; rps: number[]; seq_p50: number[]; seq_p99: number[]; emb_us: number[]; emb_rss_mb: number[]; emb_rps: number[]; errors: number }> = {};
  let target: { url: string; headers: Record<string, string>; body: string } | null = null;
  let embeddedRuns = 0;
  await withBenchServices({ root, name: 'flags', databaseUrl: DATABASE_URL, masterKey: MASTER }, async (env, children) => {
    for (let round = 0; round < ROUNDS; round++) {
      for (const node of nodes) {
        for (const flags of round % 2 ? [...FLAG_SETS].reverse() : FLAG_SETS) {
          const key = `${node.version} ${flags.join(' ') || '(none)'}`;
          process.stderr.write(`flags: round ${round + 1}, ${key} …\n`);
          const start = async (role: string | null, extra: Record<string, string> = {}) => {
            const port = await freePort();
            const child = startCompiledGateway(root, { ...env, ...extra, PORT: String(port), ...(role ? { SVC_ROLE: role } : {}) }, { build: false, node: node.bin, flags });
            children.push(child);
            // A new embedded database is created and migrated first: a minute on a busy machine.
            await waitHttp(`http://127.0.0.1:${port}/healthz`, 240_000);
            return { child, url: `http://127.0.0.1:${port}` };
          };
          const stop = (p: { child: ChildProcess }) => stopChild(p.child);
          const worker = await start('worker');
          const api = await start('api');
          target ??= await inferenceTarget(api.url);
          const t = { ...target, url: `${api.url}/v1/inference` };
          await wrk(t, { connections: CONNECTIONS, durationS: SECONDS });
          const [a0, w0, g0, t0] = [cpuUs(api.child.pid!), cpuUs(worker.child.pid!), await gcReading(api.url), otherThreadsUs(api.child.pid!)];
          const sampler = rssSampler(api.child.pid!);
          const r = await wrk(t, { connections: CONNECTIONS, durationS: SECONDS });
          const rss = sampler.stop();
          const [a1, w1, g1, t1] = [cpuUs(api.child.pid!), cpuUs(worker.child.pid!), await gcReading(api.url), otherThreadsUs(api.child.pid!)];
          const per1k = (kind: string) => Math.round((((g1.counts[kind] ?? 0) - (g0.counts[kind] ?? 0)) / r.requests) * 1e4) / 10;
          const heap = await heapMb(api.url);
          const seq = await wrk(t, { connections: 1, durationS: Math.max(3, SECONDS / 2) });
          const row = (rows[key] ??= { node: node.version, flags: flags.join(' ') || '(none)', api_us: [], threads_us: [], worker_us: [], gc_us: [], gcs: [], rss_mb: [], heap: [], rps: [], seq_p50: [], seq_p99: [], emb_us: [], emb_rss_mb: [], emb_rps: [], errors: 0 });
          row.api_us.push(Math.round((a1 - a0) / r.requests));
          row.threads_us.push(Math.round((t1 - t0) / r.requests));
          row.worker_us.push(Math.round((w1 - w0) / r.requests));
          row.gc_us.push(Math.round(((g1.seconds - g0.seconds) * 1e6) / r.requests));
          row.gcs.push(`${per1k('minor')}/${per1k('major')}`);
          row.rss_mb.push(rss);
          row.heap.push(heap);
          row.rps.push(r.requests_per_s);
          row.seq_p50.push(seq.latency_ms.p50);
          row.seq_p99.push(seq.latency_ms.p99);
          row.errors += r.errors + r.non_2xx + seq.errors + seq.non_2xx;
          for (const p of [api, worker]) await stop(p);
          if (EMBEDDED) {
            // The embedded default on the same flags: a new data directory each time, as a first start has.
            const dataDir = path.join(tmp, `flags-embedded-${process.pid}-${embeddedRuns++}`);
            const e = await start(null, { DATABASE_URL: '', REDIS_URL: '', SVC_DATA_DIR: dataDir });
            const et = await inferenceTarget(e.url);
            await wrk(et, { connections: CONNECTIONS, durationS: SECONDS });
            const e0 = cpuUs(e.child.pid!);
            const eSampler = rssSampler(e.child.pid!);
            const er = await wrk(et, { connections: CONNECTIONS, durationS: SECONDS });
            row.emb_rss_mb.push(eSampler.stop());
            row.emb_us.push(Math.round((cpuUs(e.child.pid!) - e0) / er.requests));
            row.emb_rps.push(er.requests_per_s);
            row.errors += er.errors + er.non_2xx;
            await stop(e);
            rmSync(dataDir, { recursive: true, force: true });
          }
        }
      }
    }
  });
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
  const lines = [
    `wrk, ${CONNECTIONS} connections, ${SECONDS} s per flag set after as long a warm-up, ${ROUNDS} rounds (values per round; the median first). Load average at the end: ${(await import('node:os')).loadavg().map((x) => x.toFixed(2)).join(' / ')}.`,
    '',
    '| Node | flags | api µs per inference | of which threads other than the main one | worker µs | api GC µs per request | scavenges / mark-compacts per 1,000 requests | api RSS MB, highest under load | heap used/total MB after | req/s | sequential p50 / p99 ms | embedded µs per inference | embedded RSS MB, highest under load | embedded req/s | errors |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...Object.values(rows).map(
      (r) =>
        `| ${r.node} | ${r.flags} | ${med(r.api_us)} (${r.api_us.join(', ')}) | ${med(r.threads_us)} (${r.threads_us.join(', ')}) | ${med(r.worker_us)} | ${med(r.gc_us)} | ${r.gcs.join(', ')} | ${med(r.rss_mb)} (${r.rss_mb.join(', ')}) | ${r.heap.join(', ')} | ${med(r.rps)} | ${med(r.seq_p50)} / ${med(r.seq_p99)} | ` +
        (r.emb_us.length ? `${med(r.emb_us)} (${r.emb_us.join(', ')}) | ${med(r.emb_rss_mb)} (${r.emb_rss_mb.join(', ')}) | ${med(r.emb_rps)} | ` : '| | | ') +
        `${r.errors} |`,
    ),
  ];
  writeFileSync(path.join(tmp, 'flags.md'), `${lines.join('\n')}\n`);
  process.stdout.write(`${lines.join('\n')}\n`);
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench/flags.ts failed: ${err.stack ?? err}\n`);
    process.exit(1);
  },
);
