/**
 * npm run bench: the gateway against a bare fastify proxy, both in front of the same zero-latency mock provider, on
 * loopback, measured in one run with autocannon. Writes bench/results.json and bench/results.md.
 *
 * Env: DATABASE_URL (default local PostgreSQL), REDIS_URL (default local Redis), BENCH_DURATION_S (10),
 * BENCH_CONNECTIONS (50), BENCH_WARMUP_S (3), BENCH_ONLY (comma-separated scenario names), BENCH_PACED_RATE (the rate of
 * the added-latency run; default half the gateway's uncached peak), BENCH_NODE_FLAGS (extra Node flags for the gateway,
 * e.g. --cpu-prof), BENCH_SPLIT (0: skip the second deployment, an api process and a worker process; see README).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { Agent, Pool, request as undiciRequest } from 'undici';
import { testPki } from '../test/helpers/https-receiver.ts';
import { freePort, rssMb, startCompiledGateway, waitHttp } from './gateway.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tmp = path.join(root, 'bench', 'tmp');
const DATABASE_URL = process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const DURATION = Number(process.env.BENCH_DURATION_S ?? 10);
const WARMUP = Number(process.env.BENCH_WARMUP_S ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const ONLY = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',')) : null;
const MASTER = `svc_sk_bench_${randomBytes(16).toString('hex')}`;
const children: ChildProcess[] = [];

function start(name: string, script: string, env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`${name} exited with ${code}: ${err}`)));
    child.stdout!.on('data', (d: Buffer) => {
      if (d.toString().includes('LISTENING')) resolve(child);
    });
  });
}

interface Scenario {
  name: string;
  url: string;
  method: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  pid: number;
}

interface Result {
  name: string;
  /** CPU milliseconds per request spent by each process group during the measured run (whole machine: 2 cores). */
  cpu_ms_per_request?: Record<string, number>;
  /** Share of the machine's CPU that was busy during the measured run (1 = every core). */
  machine_busy?: number;
  requests_per_s: number;
  latency_ms: { p50: number; p99: number; p99_9: number; mean: number };
  non_2xx: number;
  errors: number;
  rss_mb: number;
  /** The split deployment's worker process (SVC_ROLE=worker), beside the api process's rss_mb. */
  rss_worker_mb?: number;
  ratio_to_baseline?: { throughput: number };
}

/**
 * Latency at a fixed rate, open loop: one request every 1/rate seconds whatever the answers, each latency measured from
 * the moment it was due to be sent (so a slow server is not hidden by the generator waiting for it). autocannon's
 * overallRate instead lets each connection send its quota for the second at once, so it measures bursts, and it reports
 * whole milliseconds, too coarse for a sub-millisecond difference.
 */
async function paced(s: Scenario, rate: number, durationS: number): Promise<{ p50: number; p99: number; p99_9: number; non2xx: number; errors: number; sent: number }> {
  const url = new URL(s.url);
  const pool = new Pool(url.origin, { connections: 256, pipelining: 1, keepAliveTimeout: 60_000 });
  const latencies: number[] = [];
  let non2xx = 0;
  let errors = 0;
  const n = Math.round(rate * durationS);
  const interval = 1000 / rate;
  const pending: Promise<void>[] = [];
  const started = performance.now();
  for (let i = 0; i < n; i++) {
    const due = started + i * interval;
    const wait = due - performance.now();
    if (wait >= 1) await new Promise((r) => setTimeout(r, wait));
    pending.push(
      pool
        .request({ method: s.method, path: url.pathname, headers: s.headers, body: s.body })
        .then(async (res) => {
          await res.body.dump();
          latencies.push(performance.now() - due);
          if (res.statusCode < 200 || res.statusCode >= 300) non2xx++;
        })
        .catch(() => {
          errors++;
        }),
    );
  }
  await Promise.all(pending);
  await pool.close();
  latencies.sort((a, b) => a - b);
  const at = (q: number) => Math.round((latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN) * 100) / 100;
  return { p50: at(0.5), p99: at(0.99), p99_9: at(0.999), non2xx, errors, sent: n };
}

async function drive(s: Scenario, duration: number, rate?: number): Promise<autocannon.Result> {
  return autocannon({
    url: s.url,
    method: s.method,
    headers: s.headers,
    body: s.body,
    connections: CONNECTIONS,
    duration,
    ...(rate ? { overallRate: rate } : {}),
  });
}

/** CPU ticks per process group, from /proc: where a request's cost lands on this machine. */
const groupPids = new Map<number, string>();
function cpuSnapshot(): { groups: Map<string, number>; busy: number; total: number } {
  const groups = new Map<string, number>();
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
      (pid === process.pid ? 'load generator (autocannon)' : comm === 'postgres' ? 'PostgreSQL' : comm.startsWith('redis-server') ? 'Redis' : null);
    if (group) groups.set(group, (groups.get(group) ?? 0) + ticks);
  }
  const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.split(/\s+/).slice(1).map(Number);
  const idle = cpu[3]! + cpu[4]!;
  const total = cpu.reduce((a, b) => a + b, 0);
  return { groups, busy: total - idle, total };
}

async function measure(s: Scenario): Promise<Result> {
  await drive(s, WARMUP);
  const before = cpuSnapshot();
  const r = await drive(s, DURATION);
  const after = cpuSnapshot();
  const requests = r.requests.total;
  const msPerTick = 1000 / 100; // USER_HZ
  const cpu: Record<string, number> = {};
  for (const [group, ticks] of after.groups) {
    const used = (ticks - (before.groups.get(group) ?? 0)) * msPerTick;
    if (used > 0 && requests > 0) cpu[group] = Math.round((used / requests) * 1000) / 1000;
  }
  return {
    cpu_ms_per_request: cpu,
    machine_busy: Math.round(((after.busy - before.busy) / (after.total - before.total)) * 100) / 100,
    name: s.name,
    requests_per_s: Math.round(r.requests.average),
    latency_ms: { p50: r.latency.p50, p99: r.latency.p99, p99_9: r.latency.p99_9, mean: Math.round(r.latency.mean * 100) / 100 },
    non_2xx: r.non2xx,
    errors: r.errors + r.timeouts,
    rss_mb: rssMb(s.pid),
  };
}

async function api(base: string, method: string, url: string, key: string, body?: unknown) {
  const res = await fetch(base + url, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: (await res.json().catch(() => null)) as any };
}

async function main(): Promise<void> {
  mkdirSync(tmp, { recursive: true });
  const schema = `bench_${Date.now().toString(36)}`;
  const dbUrl = new URL(DATABASE_URL);
  dbUrl.searchParams.set('schema', schema);

  const mockPort = await freePort();
  const mock = await start('mock provider', 'bench/mock-provider.ts', { PORT: String(mockPort) });
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

  // A live HTTPS webhook receiver (the steady state of a deployment: deliveries succeed on kept-alive connections).
  const pki = testPki();
  writeFileSync(path.join(tmp, 'receiver.key'), pki.key);
  writeFileSync(path.join(tmp, 'receiver.crt'), pki.cert);
  const receiverPort = await freePort();
  const receiver = await start('webhook receiver', 'bench/webhook-receiver.ts', {
    PORT: String(receiverPort),
    TLS_KEY_FILE: path.join(tmp, 'receiver.key'),
    TLS_CERT_FILE: path.join(tmp, 'receiver.crt'),
  });
  groupPids.set(receiver.pid!, 'webhook receiver');

  const baselinePort = await freePort();
  const baseline = await start('baseline proxy', 'bench/baseline-proxy.ts', {
    PORT: String(baselinePort),
    UPSTREAM: `http://127.0.0.1:${mockPort}/v1`,
  });
  groupPids.set(baseline.pid!, 'baseline proxy');

  const gatewayEnv = {
    DATABASE_URL: dbUrl.toString(),
    REDIS_URL,
    SVC_REDIS_PREFIX: `${schema}:`,
    SVC_MASTER_KEY: MASTER,
    SVC_PROVIDERS_FILE: providersFile,
    SVC_EGRESS_ALLOWLIST: '127.0.0.1',
    NODE_EXTRA_CA_CERTS: pki.caFile,
  };
  let built = false;
  const startGateway = async (role: 'all' | 'api' | 'worker', group: string) => {
    const port = await freePort();
    const child = startCompiledGateway(root, { ...gatewayEnv, PORT: String(port), SVC_ROLE: role }, { build: !built });
    built = true;
    children.push(child);
    groupPids.set(child.pid!, group);
    const url = `http://127.0.0.1:${port}`;
    await waitHttp(`${url}/healthz`);
    return { child, url };
  };
  const { child: gateway, url: base } = await startGateway('all', 'gateway');

  // A real project, a key, limits high enough not to bind, and (when the webhooks API exists) a subscribed webhook.
  const project = await api(base, 'POST', '/v1/projects', MASTER, { name: 'bench', plan: 'enterprise' });
  const projectId = project.body.id as string;
  const limits = await api(base, 'PUT', `/v1/projects/${projectId}/rate-limits`, MASTER, {
    requests_per_minute: 100_000_000,
    tokens_per_minute: 1_000_000_000,
    burst: 100_000_000,
  });
  const key = await api(base, 'POST', '/v1/keys', MASTER, {
    project_id: projectId,
    name: 'bench',
    scopes: ['inference:write', 'keys:manage', 'governance:manage'],
  });
  const secret = key.body.secret as string;
  const notes: string[] = [];
  if (limits.status !== 200) notes.push(`rate limits not set (PUT rate-limits answered ${limits.status})`);
  const hook = await api(base, 'POST', '/v1/webhooks', secret, {
    project_id: projectId,
    url: `https://127.0.0.1:${receiverPort}/bench-receiver`,
    events: ['inference.completed'],
  });
  if (hook.status !== 200) notes.push(`no webhook subscribed (POST /v1/webhooks answered ${hook.status})`);

  const auth = { authorization: `Bearer ${secret}`, 'content-type': 'application/json' };
  const inferenceBody = (cache: boolean) =>
    JSON.stringify({ model: 'bench-model', project_id: projectId, messages: [{ role: 'user', content: 'ping' }], ...(cache ? { cache: true } : {}) });
  const all: Scenario[] = [
    { name: 'baseline POST /v1/inference', url: `http://127.0.0.1:${baselinePort}/v1/inference`, method: 'POST', headers: { 'content-type': 'application/json' }, body: inferenceBody(false), pid: baseline.pid! },
    { name: 'gateway POST /v1/inference (uncached)', url: `${base}/v1/inference`, method: 'POST', headers: auth, body: inferenceBody(false), pid: gateway.pid! },
    { name: 'gateway POST /v1/inference (cached)', url: `${base}/v1/inference`, method: 'POST', headers: auth, body: inferenceBody(true), pid: gateway.pid! },
    { name: 'gateway GET /v1/keys', url: `${base}/v1/keys`, method: 'GET', headers: { authorization: `Bearer ${secret}` }, pid: gateway.pid! },
    { name: 'gateway POST /graphql (keys)', url: `${base}/graphql`, method: 'POST', headers: auth, body: JSON.stringify({ query: '{ keys(first: 20) { edges { node { id name } } } }' }), pid: gateway.pid! },
  ];
  const scenarios = all.filter((s) => !ONLY || ONLY.has(s.name));

  const results: Result[] = [];
  for (const s of scenarios) {
    process.stderr.write(`bench: ${s.name} …\n`);
    results.push(await measure(s));
  }
  const baselineResult = results.find((r) => r.name.startsWith('baseline'));
  if (baselineResult) {
    for (const r of results) r.ratio_to_baseline = { throughput: Math.round((r.requests_per_s / baselineResult.requests_per_s) * 100) / 100 };
  }

  // Added latency at half of the gateway's peak uncached throughput: both driven at the same fixed rate.
  const baseScenario = scenarios.find((s) => s.name.startsWith('baseline'));
  const addedLatency = async (uncached: Result | undefined, gwScenario: Scenario | undefined) => {
    if (!uncached || !baseScenario || !gwScenario || uncached.non_2xx !== 0) return null;
    const rate = Number(process.env.BENCH_PACED_RATE) || Math.max(100, Math.round(uncached.requests_per_s / 2));
    const b = await paced(baseScenario, rate, DURATION);
    const g = await paced(gwScenario, rate, DURATION);
    const round = (x: number) => Math.round(x * 100) / 100;
    return {
      rate_per_s: rate,
      method: 'open loop, paced (bench/run.ts paced())',
      baseline_p50_ms: b.p50,
      gateway_p50_ms: g.p50,
      added_p50_ms: round(g.p50 - b.p50),
      baseline_p99_ms: b.p99,
      gateway_p99_ms: g.p99,
      added_p99_ms: round(g.p99 - b.p99),
      baseline_p99_9_ms: b.p99_9,
      gateway_p99_9_ms: g.p99_9,
      non_2xx: b.non2xx + g.non2xx,
      errors: b.errors + g.errors,
    };
  };
  const added = await addedLatency(
    results.find((r) => r.name.includes('(uncached)')),
    scenarios.find((s) => s.name.includes('(uncached)')),
  );

  // The same inference scenarios on the split deployment (README "Running several replicas"): one process answers the
  // API (SVC_ROLE=api) and a second one (SVC_ROLE=worker) writes the usage stream and sends the webhooks, so that the
  // background work leaves the request event loop. Same database, Redis, key and webhook.
  let addedSplit: Awaited<ReturnType<typeof addedLatency>> = null;
  const splitOn = process.env.BENCH_SPLIT !== '0' && scenarios.some((s) => s.name.includes('POST /v1/inference ('));
  if (splitOn) {
    await stopChild(gateway);
    const worker = await startGateway('worker', 'gateway worker');
    const { child: apiChild, url: apiBase } = await startGateway('api', 'gateway');
    const split: Scenario[] = scenarios
      .filter((s) => s.name.startsWith('gateway POST /v1/inference ('))
      .map((s) => ({ ...s, name: s.name.replace('gateway ', 'split api+worker '), url: s.url.replace(base, apiBase), pid: apiChild.pid! }));
    for (const s of split) {
      process.stderr.write(`bench: ${s.name} …\n`);
      const r = await measure(s);
      r.rss_worker_mb = rssMb(worker.child.pid!);
      if (baselineResult) r.ratio_to_baseline = { throughput: Math.round((r.requests_per_s / baselineResult.requests_per_s) * 100) / 100 };
      results.push(r);
    }
    addedSplit = await addedLatency(
      results.find((r) => r.name.startsWith('split') && r.name.includes('(uncached)')),
      split.find((s) => s.name.includes('(uncached)')),
    );
  }

  // Every inference emitted inference.completed to the subscribed webhook: how long the deliveries took to catch up
  // after the load stopped, and whether each reached the receiver.
  const webhooks = await drainDeliveries(schema, `https://127.0.0.1:${receiverPort}/count`);

  const machine = {
    cpus: os.cpus().length,
    cpu_model: os.cpus()[0]?.model ?? 'unknown',
    memory_gb: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    platform: `${os.platform()} ${os.release()}`,
    postgres: execFileSync('psql', ['--version']).toString().trim(),
    redis: execFileSync('redis-server', ['--version']).toString().trim().split(' ').slice(0, 3).join(' '),
  };
  const report = {
    date: new Date().toISOString(),
    machine,
    settings: { connections: CONNECTIONS, duration_s: DURATION, warmup_s: WARMUP },
    results,
    added_latency_at_half_peak: added,
    added_latency_at_half_peak_split: addedSplit,
    webhooks,
    notes,
  };
  writeFileSync(path.join(root, 'bench', 'results.json'), `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(path.join(root, 'bench', 'results.md'), renderMarkdown(report));
  process.stdout.write(renderMarkdown(report));

  // Stop the processes before dropping their schema (else the DROP deadlocks with the gateway's own sessions).
  await stopChildren();
  const client = new pg.Client({ connectionString: DATABASE_URL.replace(/\?.*$/, '') });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await client.end();
}

/** Waits (up to 120 s) until no delivery is pending or retrying; counts them by status and the receiver's receipts. */
async function drainDeliveries(schema: string, countUrl: string) {
  const client = new pg.Client({ connectionString: DATABASE_URL.replace(/\?.*$/, '') });
  await client.connect();
  const started = Date.now();
  let byStatus: Record<string, number> = {};
  let usageRecords = -1;
  try {
    for (;;) {
      const { rows } = await client.query(`SELECT status, count(*)::int AS n FROM "${schema}".webhook_deliveries GROUP BY status`);
      byStatus = Object.fromEntries(rows.map((r: { status: string; n: number }) => [r.status, r.n]));
      const { rows: usage } = await client.query(`SELECT count(*)::int AS n FROM "${schema}".usage_records`);
      // Settled: nothing left to send, and the outcome writer has written every usage record (none came since last look).
      const settled = !byStatus.pending && !byStatus.retrying && usage[0].n === usageRecords;
      usageRecords = usage[0].n;
      if (settled) break;
      if (Date.now() - started > 120_000) break;
      await new Promise((r) => setTimeout(r, 250));
    }
  } finally {
    await client.end();
  }
  // The receiver's certificate is the bench's own CA's; this one read need not verify it.
  const res = await undiciRequest(countUrl, { dispatcher: new Agent({ connect: { rejectUnauthorized: false } }) });
  const receiver = (await res.body.json()) as { received: number; distinct: number };
  return {
    usage_records: usageRecords,
    deliveries_by_status: byStatus,
    drain_after_load_s: Math.round((Date.now() - started) / 100) / 10,
    receiver_requests: receiver.received,
    receiver_distinct_deliveries: receiver.distinct,
  };
}

function renderMarkdown(r: any): string {
  const rows = r.results
    .map(
      (x: Result) =>
        `| ${x.name} | ${x.requests_per_s} | ${x.latency_ms.p50} | ${x.latency_ms.p99} | ${x.latency_ms.p99_9} | ${x.rss_worker_mb ? `${x.rss_mb} + ${x.rss_worker_mb}` : x.rss_mb} | ${x.non_2xx} | ${x.ratio_to_baseline?.throughput ?? ''} |`,
    )
    .join('\n');
  const a = r.added_latency_at_half_peak;
  const sp = r.added_latency_at_half_peak_split;
  const groups = [...new Set(r.results.flatMap((x: Result) => Object.keys(x.cpu_ms_per_request ?? {})))] as string[];
  const total = (x: Result) => Object.values(x.cpu_ms_per_request ?? {}).reduce((n, v) => n + v, 0);
  const cpuRows = r.results
    .map((x: Result) => `| ${x.name} | ${x.machine_busy ?? ''} | ${groups.map((g) => x.cpu_ms_per_request?.[g] ?? '').join(' | ')} | ${Math.round(total(x) * 1000) / 1000} |`)
    .join('\n');
  const cpuTable = groups.length
    ? `\nCPU per request (ms of CPU time per request, by process, during each measured run; the machine has ${r.machine.cpus} cores, so it can give ${r.machine.cpus * 1000} ms of CPU per second):\n\n| scenario | machine busy | ${groups.join(' | ')} | total |\n|---|---|${groups.map(() => '---').join('|')}|---|\n${cpuRows}\n`
    : '';
  return `# Benchmark (${r.date})

Machine: ${r.machine.cpus} cores (${r.machine.cpu_model}), ${r.machine.memory_gb} GiB, Node ${r.machine.node}, ${r.machine.postgres}, ${r.machine.redis}.
autocannon: ${r.settings.connections} connections, ${r.settings.duration_s} s per scenario after ${r.settings.warmup_s} s warm-up; load generator, gateway, mock provider and PostgreSQL/Redis share the machine.

| scenario | req/s | p50 ms | p99 ms | p99.9 ms | RSS MB | non-2xx | throughput / baseline |
|---|---|---|---|---|---|---|---|
${rows}

${cpuTable}
${a ? `Added latency at half of the gateway's peak (${a.rate_per_s} req/s, both driven at that rate, open loop: a request every 1/${a.rate_per_s} s, latency from when it was due): p50 ${a.baseline_p50_ms} → ${a.gateway_p50_ms} ms (+${a.added_p50_ms}), p99 ${a.baseline_p99_ms} → ${a.gateway_p99_ms} ms (+${a.added_p99_ms}).` : 'Added latency: not measured (the uncached scenario had errors or did not run).'}
${sp ? `\nSplit deployment (SVC_ROLE=api + SVC_ROLE=worker; RSS is api + worker), added latency at half of its peak (${sp.rate_per_s} req/s, same method): p50 ${sp.baseline_p50_ms} → ${sp.gateway_p50_ms} ms (+${sp.added_p50_ms}), p99 ${sp.baseline_p99_ms} → ${sp.gateway_p99_ms} ms (+${sp.added_p99_ms}).\n` : ''}${r.webhooks ? `\nWebhook (inference.completed to a live local HTTPS receiver): ${r.webhooks.usage_records} usage records (one per inference), deliveries by status ${JSON.stringify(r.webhooks.deliveries_by_status)}; the receiver got ${r.webhooks.receiver_distinct_deliveries} distinct deliveries (${r.webhooks.receiver_requests} requests); backlog drained ${r.webhooks.drain_after_load_s} s after the load stopped.\n` : ''}${r.notes.length ? `\nNotes: ${r.notes.join('; ')}.\n` : ''}`;
}

main()
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
}
