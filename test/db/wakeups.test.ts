import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { startReceiver, type Receiver } from '../helpers/https-receiver.ts';
import { DATABASE_URL } from '../helpers/services.ts';
import { openDatabase, type Database } from '../../src/db/client.ts';
import type { DeliveryWorker } from '../../src/jobs/webhook-delivery/worker.ts';
import { WAKE_CHANNEL, workerChannel, workerTag } from '../../src/domain/webhooks/wakeups.ts';
import { createWebhook, emitKeyRotated, testWorker, webhookEnv } from '../webhooks/support.ts';

// CI=1 runs with DATABASE_URL (.ci/run): there this never skips. Without PostgreSQL there is one worker per database.
const needsPostgres = !DATABASE_URL && process.env.CI !== '1';

/**
 * Delivery wake-ups (domain/webhooks/wakeups.ts): an event wakes one listening worker, picked at commit among the
 * schema's workers, not every replica's. Four workers, each on a Database of its own (its own pool and direct session,
 * as four replicas), count their wake-ups while events are written one by one.
 */
describe.skipIf(needsPostgres)('delivery wake-ups with four workers', () => {
  let t: TestApp;
  let operator: Client;
  let r: Receiver;
  const databases: Database[] = [];
  const workers: DeliveryWorker[] = [];
  const wakes = [0, 0, 0, 0];

  beforeAll(async () => {
    t = await buildTestApp({ env: webhookEnv() });
    operator = client(t.app);
    r = await startReceiver();
    for (let i = 0; i < 4; i++) {
      const database = await openDatabase({ databaseUrl: t.config.databaseUrl, directUrl: t.config.databaseDirectUrl, dataDir: null, poolSize: 2 });
      databases.push(database);
      const worker = testWorker({ ...t, deps: { ...t.deps, database, db: database.prisma } }, { pollIntervalMs: 60_000 });
      // The wake-ups the worker's listener acts on (wakeup-listener.ts's test), not its own retry and poll timers.
      database.direct!.onNotification((channel, payload) => {
        if (channel === WAKE_CHANNEL ? payload === database.schema : channel === workerChannel(database.direct!.pid!)) wakes[i]!++;
      });
      workers.push(worker);
      await worker.start();
    }
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await Promise.all(databases.map((d) => d.close()));
    await r?.close();
    await t?.close();
  });

  /** Writes `events` key.rotated events one at a time, each delivered before the next; the wake-ups they caused. */
  async function wakeupsFor(events: number): Promise<number[]> {
    const project = await seedProject(operator);
    const webhook = await createWebhook(operator, { project_id: project.projectId, url: r.url, events: ['key.rotated'] });
    r.secret = webhook.secret;
    const before = r.receipts.length;
    // Creating the webhook woke someone too: settle, then count from zero.
    await new Promise((resolve) => setTimeout(resolve, 100));
    wakes.fill(0);
    for (let i = 0; i < events; i++) {
      await emitKeyRotated(operator, project.keyId);
      await r.waitFor(before + i + 1, 5_000);
    }
    // A late wake-up of the last event would still count.
    await new Promise((resolve) => setTimeout(resolve, 100));
    return [...wakes];
  }

  it('wakes one worker per event (every worker advertises itself), and every event is delivered', async () => {
    const after = await wakeupsFor(20);
    const total = after.reduce((a, b) => a + b, 0);
    // Measured: 20 wake-ups for 20 events (1.0 per event), spread over the workers at random.
    expect(total).toBe(20);
    expect(after.filter((n) => n > 0).length).toBeGreaterThan(1);
    expect(r.receipts.every((x) => x.verifyError === null)).toBe(true);
  });

  it('falls back to waking every worker when none advertises itself (what one channel for all did: 4 per event)', async () => {
    const tag = workerTag(t.deps.database.schema);
    const [row] = await t.deps.database.sql.$queryRaw<{ n: number }[]>`
      SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = ${tag}`;
    expect(row!.n).toBe(4);
    for (const d of databases) await d.direct!.query('RESET application_name');
    try {
      const before = await wakeupsFor(10);
      expect(before.reduce((a, b) => a + b, 0)).toBe(40);
    } finally {
      for (const d of databases) await d.direct!.query(`SET application_name = '${tag}'`);
    }
  });
});
