/**
 * npm run bench:webhooks — webhook delivery on PostgreSQL to a local HTTPS receiver:
 *   1. latency: one event at a time, from the start of the transaction that writes it to the receiver having the body
 *      (outbox row + NOTIFY at commit + claim + sign + HTTPS POST), p50/p99;
 *   2. drain: a backlog written while the worker is stopped, deliveries/s once it starts (the worker's own capacity);
 *   3. live: concurrent writers emitting while the worker delivers, deliveries/s until the last receipt (here the
 *      writers' transactions are usually the limit).
 *
 * Env: DATABASE_URL (default local PostgreSQL; a throw-away schema is created and dropped), BENCH_WEBHOOK_SAMPLES (300),
 * BENCH_WEBHOOK_EVENTS (3000), BENCH_WEBHOOK_WRITERS (8).
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import pino from 'pino';
import { createDeps, closeDeps } from '../src/app-deps.ts';
import { loadConfig } from '../src/config/config.ts';
import { openDatabase } from '../src/db/client.ts';
import { applyMigrations } from '../src/db/migrations.ts';
import { enqueueEvent } from '../src/domain/events/outbox.ts';
import { buildApp } from '../src/api/app.ts';
import { testPki } from '../test/helpers/https-receiver.ts';

const BASE_URL = process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/postgres';
const SAMPLES = Number(process.env.BENCH_WEBHOOK_SAMPLES ?? 300);
const EVENTS = Number(process.env.BENCH_WEBHOOK_EVENTS ?? 3000);
const WRITERS = Number(process.env.BENCH_WEBHOOK_WRITERS ?? 8);
const MASTER = `svc_sk_bench_${randomBytes(16).toString('hex')}`;

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

async function main(): Promise<void> {
  const schema = `bench_wh_${randomBytes(4).toString('hex')}`;
  const url = new URL(BASE_URL);
  url.searchParams.set('schema', schema);
  const databaseUrl = url.toString();
  await applyMigrations({ kind: 'postgres', url: databaseUrl });
  const database = await openDatabase({ databaseUrl, dataDir: null, poolSize: 20 });

  // The receiver: a plain HTTPS server that notes when each event's body has arrived.
  const arrivals = new Map<string, number>();
  const waiters = new Map<string, () => void>();
  let received = 0;
  let allReceived: (() => void) | null = null;
  let expected = Infinity;
  const { key, cert, caCert } = testPki();
  const server = createServer({ key, cert, keepAlive: true }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      const eventId = JSON.parse(Buffer.concat(chunks).toString('utf8')).id as string;
      res.writeHead(200).end();
      if (!arrivals.has(eventId)) {
        arrivals.set(eventId, at);
        received++;
        waiters.get(eventId)?.();
        if (received >= expected) allReceived?.();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const receiverUrl = `https://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;

  const config = loadConfig({
    DATABASE_URL: databaseUrl,
    SVC_MASTER_KEY: MASTER,
    SVC_EGRESS_ALLOWLIST: '127.0.0.1',
    SVC_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
    LOG_LEVEL: 'warn',
  });
  const deps = await createDeps(config, { database, log: pino({ level: 'warn' }), webhookWorker: { ca: caCert } });
  const app = await buildApp(deps);
  const call = async (path: string, body: unknown) => {
    const res = await app.inject({ method: 'POST', url: path, headers: { authorization: `Bearer ${MASTER}` }, payload: body as object });
    if (res.statusCode !== 200) throw new Error(`${path}: ${res.body}`);
    return res.json();
  };
  const project = await call('/v1/projects', { name: 'bench' });
  await call('/v1/webhooks', { project_id: project.id, url: receiverUrl, events: ['policy.updated'] });
  const emit = (i: number) =>
    database.prisma.$transaction((tx) => enqueueEvent(tx, new Date(), project.id, 'policy.updated', { policy: 'rate_limits', i }));
  const writeAll = async (count: number) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: WRITERS }, async () => {
        while (next < count) await emit(next++);
      }),
    );
  };

  // 2 (first, while the worker is not running yet). Drain a backlog.
  await writeAll(EVENTS);
  expected = EVENTS;
  const drained = new Promise<void>((resolve) => (allReceived = resolve));
  const d0 = performance.now();
  await deps.webhooks.worker.start();
  await drained;
  const drainMs = performance.now() - d0;
  received = 0;
  expected = Infinity;
  arrivals.clear();

  // Warm-up: connections, TLS sessions, JIT.
  for (let i = 0; i < 20; i++) {
    const event = await emit(-i);
    if (!arrivals.has(event.id)) await new Promise<void>((resolve) => waiters.set(event.id, resolve));
  }

  // 1. Latency, one event at a time on an idle gateway.
  const latencies: number[] = [];
  const afterCommit: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const started = performance.now();
    const event = await emit(i);
    const committed = performance.now();
    if (!arrivals.has(event.id)) await new Promise<void>((resolve) => waiters.set(event.id, resolve));
    latencies.push(arrivals.get(event.id)! - started);
    afterCommit.push(Math.max(0, arrivals.get(event.id)! - committed));
  }
  latencies.sort((a, b) => a - b);
  afterCommit.sort((a, b) => a - b);

  // 3. Live: WRITERS concurrent writers emit EVENTS events; the clock stops at the last receipt.
  received = 0;
  arrivals.clear();
  expected = EVENTS;
  const done = new Promise<void>((resolve) => (allReceived = resolve));
  const t0 = performance.now();
  await writeAll(EVENTS);
  const written = performance.now() - t0;
  await done;
  const elapsed = performance.now() - t0;

  const result = {
    database: 'postgresql',
    latency_ms: {
      samples: SAMPLES,
      p50: +pct(latencies, 50).toFixed(2),
      p99: +pct(latencies, 99).toFixed(2),
      max: +latencies[latencies.length - 1]!.toFixed(2),
      after_commit_p50: +pct(afterCommit, 50).toFixed(2),
      after_commit_p99: +pct(afterCommit, 99).toFixed(2),
    },
    drain: { events: EVENTS, deliver_s: +(drainMs / 1000).toFixed(2), deliveries_per_s: Math.round(EVENTS / (drainMs / 1000)) },
    live: {
      events: EVENTS,
      writers: WRITERS,
      write_s: +(written / 1000).toFixed(2),
      deliver_s: +(elapsed / 1000).toFixed(2),
      deliveries_per_s: Math.round(EVENTS / (elapsed / 1000)),
    },
  };
  console.log(JSON.stringify(result, null, 2));
  console.log(
    `webhooks: event→receipt p50 ${result.latency_ms.p50} ms, p99 ${result.latency_ms.p99} ms ` +
      `(from commit: p50 ${result.latency_ms.after_commit_p50} ms, p99 ${result.latency_ms.after_commit_p99} ms); ` +
      `backlog drain ${result.drain.deliveries_per_s} deliveries/s; live ${result.live.deliveries_per_s} deliveries/s ` +
      `(${EVENTS} events, ${WRITERS} writers)`,
  );

  await app.close();
  await closeDeps(deps);
  server.closeAllConnections();
  server.close();
  const admin = new pg.Client({ connectionString: BASE_URL });
  await admin.connect();
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
