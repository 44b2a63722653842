/**
 * `node --import tsx bench/allocation.ts`: what an uncached inference allocates in the api, and where. An api and a
 * worker process (compiled, `npm start`'s flags) on PostgreSQL (a fresh schema) and a Redis server of their own, in
 * front of the bench's mock provider, on each Node of BENCH_NODES (bench/nodes.ts; default the machine's and 24).
 * After a warm-up (BENCH_ALLOC_S seconds, 50 connections), V8's sampling heap profiler runs over one window of as
 * many seconds at 50 connections (bench/allocation-sampler.cjs: the objects the collectors freed are kept, so it
 * counts everything allocated, not what survived). Printed: KB allocated per inference, by package (an allocation in
 * Node's internals counts for its nearest caller in a package or this repository, as bench/profile.ts counts CPU),
 * and the sites (function, file:line) allocating the most. The profiler costs CPU of its own: read bytes, not µs.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, startCompiledGateway, startScript, stopChild, waitHttp, withBenchServices } from './gateway.ts';
import { benchNodes, type BenchNode } from './nodes.ts';
import { packageOf } from './profile.ts';
import { wrk, wrkAvailable } from './wrk.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tmp = path.join(root, 'bench', 'tmp');
const DATABASE_URL = process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/postgres';
const SECONDS = Number(process.env.BENCH_ALLOC_S ?? 8);
const MASTER = `svc_sk_bench_${randomBytes(16).toString('hex')}`;

interface HeapNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: HeapNode[];
}

/** Bytes by package and by site, each site's package as profile.ts decides it (Node's internals: the nearest caller's). */
export function summarizeAllocations(head: HeapNode, rootDir: string): { total: number; byPackage: Map<string, number>; bySite: Map<string, number> } {
  const byPackage = new Map<string, number>();
  const bySite = new Map<string, number>();
  let total = 0;
  const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v);
  const walk = (n: HeapNode, callerPkg: string | null, callerSite: string | null) => {
    const f = n.callFrame;
    let pkg = packageOf(f.url, f.functionName) ?? 'idle';
    const file = f.url.startsWith('file://') ? path.relative(rootDir, fileURLToPath(f.url)) : f.url;
    let site = `${f.functionName || '(anonymous)'} (${file}:${f.lineNumber + 1})`;
    if ((pkg === 'node internals' || pkg === 'V8 builtins') && callerPkg !== null) {
      pkg = callerPkg;
      site = `${callerSite} → ${f.functionName || '(anonymous)'}`;
    }
    if (n.selfSize > 0) {
      total += n.selfSize;
      add(byPackage, pkg, n.selfSize);
      add(bySite, `${pkg}: ${site}`, n.selfSize);
    }
    // Still Node's or V8's here only with no caller to count for (the root, a callback from the event loop).
    const own = pkg === 'node internals' || pkg === 'V8 builtins' ? null : pkg;
    for (const c of n.children) walk(c, own, own === null ? null : site);
  };
  walk(head, null, null);
  return { total, byPackage, bySite };
}

const call = async (base: string, method: string, route: string, body: object) =>
  (await (await fetch(`${base}${route}`, { method, headers: { authorization: `Bearer ${MASTER}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })).json()) as Record<string, string>;

async function onNode(node: BenchNode, env: Record<string, string>, children: ChildProcess[]): Promise<void> {
  const start = async (role: string, extra: string[] = [], extraEnv: Record<string, string> = {}) => {
    const port = await freePort();
    const child = startCompiledGateway(root, { ...env, ...extraEnv, PORT: String(port), SVC_ROLE: role }, { build: false, node: node.bin, flags: [...startScript(root).tokens, ...extra] });
    children.push(child);
    await waitHttp(`http://127.0.0.1:${port}/healthz`, 240_000);
    return { child, url: `http://127.0.0.1:${port}` };
  };
  const worker = await start('worker');
  const file = path.join(tmp, `allocation-${process.pid}-${node.version}.json`);
  rmSync(file, { force: true });
  const api = await start('api', [`--require=${path.join(root, 'bench', 'allocation-sampler.cjs')}`], { BENCH_ALLOCATION_FILE: file });
  const project = await call(api.url, 'POST', '/v1/projects', { name: 'allocation', plan: 'enterprise' });
  await call(api.url, 'PUT', `/v1/projects/${project.id}/rate-limits`, { requests_per_minute: 100_000_000, tokens_per_minute: 1_000_000_000, burst: 100_000_000 });
  const key = await call(api.url, 'POST', '/v1/keys', { project_id: project.id, name: 'allocation', scopes: ['inference:write'] });
  const target = {
    url: `${api.url}/v1/inference`,
    headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'bench-model', project_id: project.id, messages: [{ role: 'user', content: 'ping' }] }),
  };
  await wrk(target, { connections: 50, durationS: SECONDS });
  api.child.kill('SIGUSR2');
  await new Promise((r) => setTimeout(r, 300));
  const r = await wrk(target, { connections: 50, durationS: SECONDS });
  api.child.kill('SIGUSR2');
  for (let i = 0; i < 100 && !existsSync(file); i++) await new Promise((res) => setTimeout(res, 100));
  const profile = JSON.parse(readFileSync(file, 'utf8')) as { head: HeapNode; error?: string };
  if (profile.error) throw new Error(profile.error);
  const s = summarizeAllocations(profile.head, root);
  // Requests the profiler saw: wrk's, plus the 300 ms before it started (none: nothing was sent then).
  const perReq = (b: number) => (b / r.requests / 1024).toFixed(2);
  const top = (m: Map<string, number>, n: number) => [...m].sort((a, b) => b[1] - a[1]).slice(0, n);
  process.stdout.write(`\n## Node ${node.version}\n\n${r.requests} inferences at ${Math.round(r.requests / SECONDS)} req/s: ${perReq(s.total)} KB allocated per inference in the api\n\n`);
  process.stdout.write(`By package (KB per inference): ${top(s.byPackage, 14).map(([k, v]) => `${k} ${perReq(v)}`).join(', ')}\n\n`);
  process.stdout.write(`The sites allocating the most (KB per inference):\n\n${top(s.bySite, Number(process.env.BENCH_ALLOC_TOP ?? 40)).map(([k, v]) => `- ${perReq(v)} ${k}`).join('\n')}\n`);
  // Stopped before the next Node's pair (and before Redis goes away): each writes what it holds on SIGTERM.
  await Promise.all([api, worker].map((p) => stopChild(p.child)));
}

async function main(): Promise<void> {
  if (!wrkAvailable()) throw new Error('bench/allocation.ts needs wrk (Debian: apt-get install -y wrk)');
  mkdirSync(tmp, { recursive: true });
  await withBenchServices({ root, name: 'allocation', databaseUrl: DATABASE_URL, masterKey: MASTER }, async (env, children) => {
    for (const node of benchNodes()) await onNode(node, env, children);
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
