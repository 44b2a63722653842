/**
 * npm run soak (not in CI): the gateway under a steady, moderate load for SOAK_SECONDS, its resident memory sampled
 * every SOAK_SAMPLE_S. Passes when RSS stays under SOAK_RSS_LIMIT_MB and is flat: the average of the last window is at
 * most SOAK_FLAT_TOLERANCE (a fraction) above the first window's, a window being a minute (a third of a shorter run).
 * Also records the RSS at rest 2 s after start, before any load. Writes the `soak` member of bench/results.json (and
 * results.md again); exits 1 when it does not pass.
 *
 * Set up like bench/run.ts: on loopback, a zero-latency mock provider (bench/mock-provider.ts) in its own process, the
 * gateway (compiled, as `npm start` runs it, NODE_ENV=production) on PostgreSQL + Redis in a fresh schema and key
 * prefix, a real project and key with limits that do not bind, and a webhook subscribed to inference.completed that a
 * local HTTPS receiver accepts. The load cycles through uncached and cached inference and a key list.
 *
 * Env: DATABASE_URL (default local PostgreSQL), REDIS_URL (default local Redis), SOAK_SECONDS (300), SOAK_RATE (200
 * requests/s overall), SOAK_CONNECTIONS (20), SOAK_WARMUP_S (15), SOAK_SAMPLE_S (10), SOAK_RSS_LIMIT_MB (250),
 * SOAK_FLAT_TOLERANCE (0.1), SOAK_GATEWAY_NODE_OPTIONS (NODE_OPTIONS for the gateway only), BENCH_NODE_FLAGS (flags
 * put before the start script's, for V8 flags that NODE_OPTIONS refuses, e.g. `--single-threaded-gc`).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { freePort, rssMb, startCompiledGateway, waitHttp } from '../bench/gateway.ts';
import { writeMember } from '../bench/results-file.ts';
import { Redis } from 'ioredis';
import pg from 'pg';
import { testPki } from '../test/helpers/https-receiver.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tmp = path.join(root, 'bench', 'tmp');
const DATABASE_URL = process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const num = (name: string, fallback: number): number => {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got "${raw}"`);
  return n;
};
const SECONDS = num('SOAK_SECONDS', 300);
const RATE = num('SOAK_RATE', 200);
const CONNECTIONS = num('SOAK_CONNECTIONS', 20);
const WARMUP_S = num('SOAK_WARMUP_S', 15);
const SAMPLE_S = num('SOAK_SAMPLE_S', 10);
const RSS_LIMIT_MB = num('SOAK_RSS_LIMIT_MB', 250);
const FLAT_TOLERANCE = num('SOAK_FLAT_TOLERANCE', 0.1);
/** Node flags for the gateway alone, e.g. `--max-old-space-size=192` to see what a heap cap does to RSS. */
const GATEWAY_NODE_OPTIONS = process.env.SOAK_GATEWAY_NODE_OPTIONS ?? '';
const MASTER = `svc_sk_soak_${randomBytes(16).toString('hex')}`;
const children: ChildProcess[] = [];

function startMock(port: number): Promise<void> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/mock-provider.ts'], {
    cwd: root,
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`mock provider exited with ${code}`)));
    child.stdout!.on('data', (d: Buffer) => {
      if (d.toString().includes('LISTENING')) resolve();
    });
  });
}

async function api(base: string, method: string, url: string, key: string, body?: unknown) {
  const res = await fetch(base + url, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = (await res.json().catch(() => null)) as any;
  if (res.status !== 200) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

const avg = (xs: number[]) => (xs.length ? Math.round((xs.reduce((a, b) => a + b, 0) / xs.length) * 10) / 10 : 0);

/** Least-squares slope of RSS over time, in MB per minute. */
function slopePerMinute(samples: { t_s: number; rss_mb: number }[]): number {
  if (samples.length < 2) return 0;
  const mt = avg(samples.map((s) => s.t_s));
  const mr = avg(samples.map((s) => s.rss_mb));
  const num = samples.reduce((a, s) => a + (s.t_s - mt) * (s.rss_mb - mr), 0);
  const den = samples.reduce((a, s) => a + (s.t_s - mt) ** 2, 0);
  return Math.round((num / den) * 60 * 100) / 100;
}

async function main(): Promise<void> {
  mkdirSync(tmp, { recursive: true });
  const schema = `soak_${Date.now().toString(36)}`;
  const dbUrl = new URL(DATABASE_URL);
  dbUrl.searchParams.set('schema', schema);

  const mockPort = await freePort();
  await startMock(mockPort);
  const providersFile = path.join(tmp, 'soak-providers.json');
  writeFileSync(
    providersFile,
    JSON.stringify({
      providers: [
        {
          name: 'soak',
          kind: 'openai',
          base_url: `http://127.0.0.1:${mockPort}/v1`,
          region: 'local',
          timeout_ms: 5000,
          models: [{ id: 'bench-model', input_per_mtok: 1.0, output_per_mtok: 2.0 }],
        },
      ],
    }),
  );

  // The webhook receiver: answers every delivery 200 at once, and counts them.
  const pki = testPki();
  let deliveries = 0;
  const receiver = createServer({ key: pki.key, cert: pki.cert, keepAlive: true }, (req, res) => {
    req.resume();
    req.on('end', () => {
      deliveries += 1;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"received":true}');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
  const receiverPort = (receiver.address() as net.AddressInfo).port;

  const gatewayPort = await freePort();
  const gateway = startCompiledGateway(root, {
    PORT: String(gatewayPort),
    DATABASE_URL: dbUrl.toString(),
    REDIS_URL,
    SVC_REDIS_PREFIX: `${schema}:`,
    SVC_MASTER_KEY: MASTER,
    SVC_PROVIDERS_FILE: providersFile,
    SVC_EGRESS_ALLOWLIST: '127.0.0.1',
    NODE_EXTRA_CA_CERTS: pki.caFile,
    ...(GATEWAY_NODE_OPTIONS ? { NODE_OPTIONS: GATEWAY_NODE_OPTIONS } : {}),
  });
  children.push(gateway);
  let gatewayExit: string | null = null;
  gateway.on('exit', (code, signal) => (gatewayExit = String(code ?? signal)));
  const base = `http://127.0.0.1:${gatewayPort}`;
  await waitHttp(`${base}/healthz`);
  // Resident memory at rest, before any load: what the process costs by itself.
  await new Promise((r) => setTimeout(r, 2000));
  const idleMb = rssMb(gateway.pid!);

  const project = await api(base, 'POST', '/v1/projects', MASTER, { name: 'soak', plan: 'enterprise' });
  await api(base, 'PUT', `/v1/projects/${project.id}/rate-limits`, MASTER, {
    requests_per_minute: 100_000_000,
    tokens_per_minute: 1_000_000_000,
    burst: 100_000_000,
  });
  const key = await api(base, 'POST', '/v1/keys', MASTER, {
    project_id: project.id,
    name: 'soak',
    scopes: ['inference:write', 'keys:manage', 'governance:manage', 'usage:read'],
  });
  await api(base, 'POST', '/v1/webhooks', key.secret, {
    project_id: project.id,
    url: `https://127.0.0.1:${receiverPort}/soak`,
    events: ['inference.completed'],
  });

  const auth = { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' };
  const inference = (cache: boolean) =>
    JSON.stringify({ model: 'bench-model', project_id: project.id, messages: [{ role: 'user', content: 'ping' }], ...(cache ? { cache: true } : {}) });
  // Each connection cycles through these: half uncached inference, a quarter cached, a quarter a key list.
  const requests: autocannon.Request[] = [
    { method: 'POST', path: '/v1/inference', headers: auth, body: inference(false) },
    { method: 'POST', path: '/v1/inference', headers: auth, body: inference(true) },
    { method: 'POST', path: '/v1/inference', headers: auth, body: inference(false) },
    { method: 'GET', path: '/v1/keys?limit=20', headers: { authorization: `Bearer ${key.secret}` } },
  ];
  const drive = (seconds: number) =>
    autocannon({ url: base, connections: CONNECTIONS, duration: seconds, overallRate: RATE, requests });

  process.stderr.write(`soak: warm-up ${WARMUP_S} s at ${RATE} req/s …\n`);
  await drive(WARMUP_S);

  process.stderr.write(`soak: ${SECONDS} s at ${RATE} req/s, ${CONNECTIONS} connections, RSS every ${SAMPLE_S} s …\n`);
  const samples: { t_s: number; rss_mb: number }[] = [];
  let peak = 0;
  const started = Date.now();
  const sample = () => {
    if (gatewayExit !== null) return;
    const rss = rssMb(gateway.pid!);
    peak = Math.max(peak, rss);
    return rss;
  };
  samples.push({ t_s: 0, rss_mb: sample()! });
  const sampler = setInterval(() => {
    const rss = sample();
    if (rss !== undefined) samples.push({ t_s: Math.round((Date.now() - started) / 1000), rss_mb: rss });
  }, SAMPLE_S * 1000);
  // The limit holds between samples too: a cheap 1 s peak tracker.
  const peaker = setInterval(sample, 1000);
  const result = await drive(SECONDS);
  clearInterval(sampler);
  clearInterval(peaker);
  const last = sample();
  if (last !== undefined) samples.push({ t_s: Math.round((Date.now() - started) / 1000), rss_mb: last });

  const windowS = Math.min(60, SECONDS / 3);
  const first = samples.filter((s) => s.t_s <= windowS).map((s) => s.rss_mb);
  const lastWindow = samples.filter((s) => s.t_s >= samples.at(-1)!.t_s - windowS).map((s) => s.rss_mb);
  const firstAvg = avg(first);
  const lastAvg = avg(lastWindow);
  const growth = Math.round((lastAvg - firstAvg) * 10) / 10;
  const underLimit = gatewayExit === null && peak < RSS_LIMIT_MB;
  const flat = lastAvg <= firstAvg * (1 + FLAT_TOLERANCE);

  const pool = new pg.Pool({ connectionString: DATABASE_URL.replace(/\?.*$/, ''), options: `-c search_path="${schema}"`, max: 1 });
  const usageRows = Number((await pool.query('SELECT count(*) AS n FROM usage_records')).rows[0].n);

  const report = {
    date: new Date().toISOString(),
    machine: {
      cpus: os.cpus().length,
      cpu_model: os.cpus()[0]?.model ?? 'unknown',
      memory_gb: Math.round(os.totalmem() / 2 ** 30),
      node: process.version,
      load_average_at_end: os.loadavg().map((x) => Math.round(x * 100) / 100),
    },
    settings: {
      seconds: SECONDS,
      rate_per_s: RATE,
      connections: CONNECTIONS,
      warmup_s: WARMUP_S,
      sample_s: SAMPLE_S,
      rss_limit_mb: RSS_LIMIT_MB,
      flat_tolerance: FLAT_TOLERANCE,
      gateway_node_options: GATEWAY_NODE_OPTIONS || null,
      mix: '2/4 uncached inference, 1/4 cached inference, 1/4 GET /v1/keys; webhook on inference.completed',
    },
    load: {
      requests: result.requests.total,
      requests_per_s: Math.round(result.requests.average),
      latency_ms: { p50: result.latency.p50, p99: result.latency.p99, max: result.latency.max },
      non_2xx: result.non2xx,
      errors: result.errors,
      timeouts: result.timeouts,
      usage_records_written: usageRows,
      webhook_deliveries_received: deliveries,
    },
    rss: {
      idle_after_start_mb: idleMb,
      samples,
      min_mb: Math.min(...samples.map((s) => s.rss_mb)),
      peak_mb: peak,
      window_s: windowS,
      first_window_avg_mb: firstAvg,
      last_window_avg_mb: lastAvg,
      growth_mb: growth,
      slope_mb_per_min: slopePerMinute(samples),
    },
    verdict: { gateway_alive: gatewayExit === null, under_limit: underLimit, flat, pass: underLimit && flat },
  };
  writeMember('soak', report);
  process.stdout.write(
    `soak: ${report.load.requests} requests (${report.load.requests_per_s}/s, p50 ${report.load.latency_ms.p50} ms, p99 ${report.load.latency_ms.p99} ms, ` +
      `non-2xx ${report.load.non_2xx}, errors ${report.load.errors})\n` +
      `RSS: idle ${idleMb} MB after start; under load ${samples.map((s) => s.rss_mb).join(' ')} MB; min ${report.rss.min_mb} MB, peak ${peak} MB (limit ${RSS_LIMIT_MB}); ` +
      `first ${windowS} s avg ${firstAvg} MB, last ${windowS} s avg ${lastAvg} MB (${growth >= 0 ? '+' : ''}${growth}); ` +
      `slope ${report.rss.slope_mb_per_min} MB/min\n` +
      `verdict: ${report.verdict.pass ? 'PASS' : 'FAIL'} (under limit: ${underLimit}, flat: ${flat}) → bench/results.json (soak)\n`,
  );
  if (!report.verdict.pass) process.exitCode = 1;

  // Clean up after the gateway has stopped (its transactions would hold the schema's locks).
  if (gatewayExit === null) {
    const exited = new Promise((resolve) => gateway.once('exit', resolve));
    gateway.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
  }
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
  await pool.end();
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${schema}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
  redis.disconnect();
  receiver.closeAllConnections();
  receiver.close();
}

main()
  .catch((err) => {
    process.stderr.write(`soak failed: ${err.stack ?? err}\n`);
    process.exitCode = 1;
  })
  .finally(() => {
    for (const c of children) c.kill('SIGTERM');
  });
