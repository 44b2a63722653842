import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, createTestDatabase, seedProject, type Client, type TestApp, type TestDatabase } from '../helpers/app.ts';
import { startReceiver, testPki, type Receiver } from '../helpers/https-receiver.ts';
import { DATABASE_URL, REDIS_URL, uniqueName } from '../helpers/services.ts';
import { enqueueEvent } from '../../src/domain/events/outbox.ts';
import { startGateway, type GatewayProcess } from '../helpers/gateway-process.ts';
import { createWebhook, testWorker } from './support.ts';

const ENCRYPTION_KEY = randomBytes(32).toString('hex');
let db: TestDatabase;
let t: TestApp;
let operator: Client;
const cleanup: (() => Promise<unknown> | unknown)[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  // The API side only: its own worker is never started, so every delivery below comes from the replicas under test.
  t = await buildTestApp({ database: db, env: { SVC_EGRESS_ALLOWLIST: '127.0.0.1', SVC_ENCRYPTION_KEY: ENCRYPTION_KEY } });
  operator = client(t.app);
});
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
  await t.close();
  await db.drop();
});

/** A receiver that fails the first attempt of every delivery and accepts the second: each attempt shows up once. */
async function failFirstReceiver(): Promise<Receiver> {
  const seen = new Set<string>();
  const r = await startReceiver({
    answer: (receipt) => {
      if (seen.has(receipt.deliveryId)) return 200;
      seen.add(receipt.deliveryId);
      return 500;
    },
  });
  cleanup.push(() => r.close());
  return r;
}

/** `count` events through the real outbox, each in its own transaction,. */
async function emitEvents(projectId: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    await t.deps.db.$transaction((tx) => enqueueEvent(tx, new Date(t.clock.now()), projectId, 'policy.updated', { policy: 'rate_limits', n: i }));
  }
}

function expectEachAttemptOnce(r: Receiver, deliveries: number): void {
  const perDelivery = new Map<string, number>();
  for (const x of r.receipts) perDelivery.set(x.deliveryId, (perDelivery.get(x.deliveryId) ?? 0) + 1);
  expect(perDelivery.size).toBe(deliveries);
  expect([...perDelivery.values()].every((n) => n === 2)).toBe(true);
  expect(r.receipts.every((x) => x.verifyError === null)).toBe(true);
}

async function setup(r: Receiver, webhooks: number) {
  const project = await seedProject(operator);
  for (let i = 0; i < webhooks; i++) {
    const wh = await createWebhook(operator, { project_id: project.projectId, url: `${r.url}/${i}`, events: ['policy.updated'] });
    r.secrets.set(wh.id, wh.secret);
  }
  return project;
}

describe('several delivery workers on one database', () => {
  it('send each attempt exactly once (two workers in this process, real clock, 1 s retry)', { timeout: 90_000 }, async () => {
    const short = await buildTestApp({
      database: db,
      env: { SVC_EGRESS_ALLOWLIST: '127.0.0.1', SVC_ENCRYPTION_KEY: ENCRYPTION_KEY, SVC_WEBHOOK_RETRY_SCHEDULE: '0,1' },
    });
    cleanup.push(() => short.close());
    // Real time for the workers: the retry after 1 s must come due by itself.
    short.clock.now = () => Date.now();
    const r = await failFirstReceiver();
    const project = await setup(r, 2);
    // The spec's 10 s deadline: on a loaded machine a shorter one could time out an attempt the receiver did get.
    const workers = [testWorker(short, { batchSize: 5, timeoutMs: 10_000 }), testWorker(short, { batchSize: 5, timeoutMs: 10_000 })];
    await Promise.all(workers.map((w) => w.start()));
    try {
      await emitEvents(project.projectId, 15);
      await r.waitFor(60, 50_000);
      await new Promise((resolve) => setTimeout(resolve, 1_500)); // would-be duplicates have time to show up
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
    }
    expectEachAttemptOnce(r, 30);
    const rows = await t.deps.db.webhookDelivery.findMany({ where: { projectId: project.projectId } });
    expect(rows.map((d) => [d.status, d.attempts])).toEqual(rows.map(() => ['succeeded', 2]));
  });

  it.skipIf(!DATABASE_URL)('send each attempt exactly once across two gateway processes on one PostgreSQL', { timeout: 180_000 }, async () => {
    const env = {
      DATABASE_URL: db.url!,
      SVC_ENCRYPTION_KEY: ENCRYPTION_KEY,
      SVC_EGRESS_ALLOWLIST: '127.0.0.1',
      SVC_WEBHOOK_RETRY_SCHEDULE: '0,1',
      NODE_EXTRA_CA_CERTS: testPki().caFile,
      ...(REDIS_URL ? { REDIS_URL, SVC_REDIS_PREFIX: `${uniqueName('replicas')}:` } : {}),
    };
    const gateways: GatewayProcess[] = await Promise.all([startGateway(env), startGateway(env)]);
    for (const g of gateways) cleanup.push(() => g.stop('SIGKILL'));
    const r = await failFirstReceiver();
    const project = await setup(r, 2);
    await emitEvents(project.projectId, 40);
    await r.waitFor(160, 60_000);
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expectEachAttemptOnce(r, 80);
    const attempts = await t.deps.db.webhookAttempt.count({ where: { delivery: { projectId: project.projectId } } });
    expect(attempts).toBe(160);
    expect(await Promise.all(gateways.map((g) => g.stop('SIGTERM')))).toEqual([0, 0]);
  });
});
