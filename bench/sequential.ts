/**
 * `node --import tsx bench/sequential.ts`: where a lone request's time goes. One caller at a time (wrk, one
 * connection: the independent gateway benchmarks' method) sends uncached inferences to an api and a worker process
 * (compiled, `npm start`'s flags) on PostgreSQL (a fresh schema) and a Redis server of its own, in front of the bench's
 * zero-latency mock provider, on each Node of BENCH_NODES (bench/nodes.ts; default the machine's and 24).
 *
 * Per Node: after a warm-up (BENCH_SEQ_S seconds at 50 connections, then as long at one), two measured windows of
 * BENCH_SEQ_S (5) seconds at one connection: the gateway's p50/p99 and the api's and the worker's CPU µs per request
 * (/proc, every thread); the api's CPU at rest over 5 s; a third window seen from inside the api
 * (bench/request-timing.cjs: its own time per request, and where the requests over 3 ms spent theirs). Then the api
 * again with --cpu-prof: the same warm-up and one measured window, its profile summarized for that window only
 * (bench/profile.ts: by package, and the functions the samples count for). The profile costs CPU of its own: read its
 * shares, not its µs.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuUs, freePort, startCompiledGateway, startScript, stopChild, waitHttp, withBenchServices } from './gateway.ts';
import { benchNodes, type BenchNode } from './nodes.ts';
import { summarizeProfile } from './profile.ts';
import { wrk, wrkAvailable } from './wrk.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tmp = path.join(root, 'bench', 'tmp');
const DATABASE_URL = process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/postgres';
const SECONDS = Number(process.env.BENCH_SEQ_S ?? 5);
const MASTER = `svc_sk_bench_${randomBytes(16).toString('hex')}`;

/** What bench/request-timing.cjs writes. */
interface RequestTiming {
  requests: number;
  p50_ms: number;
  p99_ms: number;
  mean_ms: number;
  slow_ms: number;
  slow: { requests: number; share_of_time: number; before_provider_ms: number; provider_ms: number; after_provider_ms: number; gc_ms: number };
}

const call = async (base: string, method: string, route: string, body: object) =>
  (await (await fetch(`${base}${route}`, { method, headers: { authorization: `Bearer ${MASTER}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })).json()) as Record<string, string>;
const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

async function onNode(node: BenchNode, env: Record<string, string>, children: ChildProcess[]): Promise<void> {
  const start = async (role: string, extra: string[] = [], extraEnv: Record<string, string> = {}) => {
    const port = await freePort();
    const child = startCompiledGateway(root, { ...env, ...extraEnv, PORT: String(port), SVC_ROLE: role }, { build: false, node: node.bin, flags: [...startScript(root).tokens, ...extra] });
    children.push(child);
    await waitHttp(`http://127.0.0.1:${port}/healthz`, 240_000);
    return { child, url: `http://127.0.0.1:${port}` };
  };
  const stop = (p: { child: ChildProcess }) => stopChild(p.child);
  const worker = await start('worker');
  // The timing preload (bench/request-timing.cjs) subscribes to nothing until its first SIGUSR2 (the third window).
  const timingFile = path.join(tmp, `request-timing-${process.pid}-${node.version}.json`);
  let api = await start('api', [`--require=${path.join(root, 'bench', 'request-timing.cjs')}`], { BENCH_TIMING_FILE: timingFile });
  const project = await call(api.url, 'POST', '/v1/projects', { name: 'sequential', plan: 'enterprise' });
  await call(api.url, 'PUT', `/v1/projects/${project.id}/rate-limits`, { requests_per_minute: 100_000_000, tokens_per_minute: 1_000_000_000, burst: 100_000_000 });
  const key = await call(api.url, 'POST', '/v1/keys', { project_id: project.id, name: 'sequential', scopes: ['inference:write'] });
  const target = (base: string) => ({
    url: `${base}/v1/inference`,
    headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'bench-model', project_id: project.id, messages: [{ role: 'user', content: 'ping' }] }),
  });
  const warm = async (base: string) => {
    await wrk(target(base), { connections: 50, durationS: SECONDS });
    await wrk(target(base), { connections: 1, durationS: SECONDS });
  };
  await warm(api.url);
  const restA = cpuUs(api.child.pid!);
  await new Promise((r) => setTimeout(r, 5_000));
  process.stdout.write(`\n## Node ${node.version}\n\napi at rest: ${((cpuUs(api.child.pid!) - restA) / 5_000).toFixed(1)} ms of CPU per second\n\n`);
  process.stdout.write('| window | requests | p50 ms | p99 ms | api CPU µs per request | worker CPU µs per request |\n|---|---|---|---|---|---|\n');
  for (let i = 1; i <= 2; i++) {
    const [a0, w0] = [cpuUs(api.child.pid!), cpuUs(worker.child.pid!)];
    const r = await wrk(target(api.url), { connections: 1, durationS: SECONDS });
    const [a1, w1] = [cpuUs(api.child.pid!), cpuUs(worker.child.pid!)];
    process.stdout.write(`| ${i} | ${r.requests} | ${r.latency_ms.p50} | ${r.latency_ms.p99} | ${Math.round((a1 - a0) / r.requests)} | ${Math.round((w1 - w0) / r.requests)} |\n`);
  }

  // A third window seen from inside the api: its own time per request, and where the slow requests' time went.
  rmSync(timingFile, { force: true });
  api.child.kill('SIGUSR2');
  await new Promise((r) => setTimeout(r, 200));
  const seen = await wrk(target(api.url), { connections: 1, durationS: SECONDS });
  api.child.kill('SIGUSR2');
  for (let i = 0; i < 50 && !existsSync(timingFile); i++) await new Promise((r) => setTimeout(r, 100));
  const t = JSON.parse(readFileSync(timingFile, 'utf8')) as RequestTiming;
  const slowMs = t.slow.before_provider_ms + t.slow.provider_ms + t.slow.after_provider_ms;
  const of = (x: number) => pct(slowMs > 0 ? x / slowMs : 0);
  process.stdout.write(
    `\nInside the api (window 3, bench/request-timing.cjs; wrk saw p50 ${seen.latency_ms.p50} / p99 ${seen.latency_ms.p99} / mean ${seen.latency_ms.mean} ms): ` +
      `from a request's headers to its response's end p50 ${t.p50_ms} / p99 ${t.p99_ms} / mean ${t.mean_ms} ms over ${t.requests} requests. ` +
      `The ${t.slow.requests} over ${t.slow_ms} ms took ${pct(t.slow.share_of_time)} of the window; of their time, before the provider call ${of(t.slow.before_provider_ms)}, ` +
      `waiting for the provider ${of(t.slow.provider_ms)}, after its answer ${of(t.slow.after_provider_ms)}; the api's GC pauses ${of(t.slow.gc_ms)}. ` +
      `wrk's percentiles are corrected for coordinated omission (a response slower than the mean interval adds the samples a steady caller would have waited meanwhile): its p99 is a share of the time, this one a share of the requests.\n`,
  );

  // The profile: the api again, with --cpu-prof, and only the measured window summarized.
  await stop(api);
  const dir = path.join(tmp, `sequential-prof-${process.pid}-${node.version}`);
  rmSync(dir, { recursive: true, force: true });
  api = await start('api', ['--cpu-prof', `--cpu-prof-dir=${dir}`]);
  await warm(api.url);
  const fromNs = process.hrtime.bigint();
  await wrk(target(api.url), { connections: 1, durationS: SECONDS });
  const toNs = process.hrtime.bigint();
  await stop(api);
  const file = path.join(dir, readdirSync(dir).find((f) => f.endsWith('.cpuprofile'))!);
  // The profile's clock is the monotonic one process.hrtime reads; its start is about when the api started.
  const profile = JSON.parse(readFileSync(file, 'utf8')) as { startTime: number };
  const ms = (ns: bigint) => Number(ns / 1000n) / 1000 - profile.startTime / 1000;
  const s = summarizeProfile(file, root, { fromMs: ms(fromNs), toMs: ms(toNs) });
  process.stdout.write(`\nProfile of the api, one measured window (${s.busySamples} busy samples), by package: ${s.byPackage.slice(0, 12).map((p) => `${p.name} ${pct(p.share)}`).join(', ')}\n\n`);
  process.stdout.write(`The functions the samples count for (a sample in Node's internals or a V8 builtin counts for its nearest caller):\n\n${s.topFrames.map((f) => `- ${pct(f.share)} ${f.name}`).join('\n')}\n\nThis repository's files: ${s.ownFiles.map((f) => `${f.file} ${pct(f.share)}`).join(', ')}\n`);
  await stop(worker);
}

async function main(): Promise<void> {
  if (!wrkAvailable()) throw new Error('bench/sequential.ts needs wrk (Debian: apt-get install -y wrk)');
  mkdirSync(tmp, { recursive: true });
  await withBenchServices({ root, name: 'sequential', databaseUrl: DATABASE_URL, masterKey: MASTER }, async (env, children) => {
    for (const node of benchNodes()) await onNode(node, env, children);
  });
}

await main();
