import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, createTestDatabase, seedProject, type Client, type TestApp, type TestDatabase } from '../helpers/app.ts';
import { startReceiver, testPki, type Receiver } from '../helpers/https-receiver.ts';
import { persistOutcomes } from '../../src/jobs/outcomes/persist-outcomes.ts';
import { testOutcome } from '../helpers/outcomes.ts';
import { createWebhook, deliveriesOf, testWorker, webhookEnv } from './support.ts';

/**
 * The inference path's deliveries (inference.completed) do not wait for a claim: the outcome writer writes them leased
 * to its own process's delivery worker and hands them over once committed. A writer that dies before sending them
 * leaves them to any worker once the lease runs out (at-least-once).
 */
type QueryEvents = { $on(event: 'query', listener: (e: { query: string }) => void): void };

let db: TestDatabase;
let t: TestApp;
let operator: Client;
let r: Receiver;
const statements: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase({ log: true });
  (db.database.prisma as unknown as QueryEvents).$on('query', (e) => statements.push(e.query));
  // The background writers' batches go to the driver directly (db/sql.ts): its statements count too.
  db.database.sql.onStatement((text) => statements.push(text));
  t = await buildTestApp({ database: db, env: webhookEnv(), webhookWorker: { ca: testPki().caCert, timeoutMs: 2_000, pollIntervalMs: 60_000 } });
  operator = client(t.app);
  r = await startReceiver();
});
afterAll(async () => {
  await t.deps.webhooks.worker.stop();
  await r.close();
  await t.close();
  await db.drop();
});

async function subscribedProject() {
  const project = await seedProject(operator, { scopes: ['inference:write'] });
  const webhook = await createWebhook(operator, { project_id: project.projectId, url: r.url, events: ['inference.completed'] });
  r.secrets.set(webhook.id, webhook.secret);
  return { project, webhook, api: client(t.app, project.secret) };
}

const claims = () => statements.filter((q) => /FOR UPDATE OF d SKIP LOCKED/i.test(q));

describe("an inference's webhook delivery", () => {
  it('is sent by the worker of the process that wrote it, without a claim, once, and recorded as succeeded', async () => {
    const { project, webhook, api } = await subscribedProject();
    await t.deps.webhooks.worker.start();
    // Its first look for due deliveries, at start, is the one claim it makes by itself.
    for (let i = 0; i < 100 && claims().length === 0; i++) await new Promise((res) => setTimeout(res, 10));
    expect(claims().length).toBeGreaterThan(0);
    await new Promise((res) => setTimeout(res, 50));
    const before = r.receipts.length;
    statements.length = 0;
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await api.post('/v1/inference', { model: 'mock-1', project_id: project.projectId, messages: [{ role: 'user', content: `n${i}` }] });
      expect(res.status).toBe(200);
      ids.push(res.body.request_id);
    }
    await t.deps.outcomes.flush();
    const receipts = (await r.waitFor(before + 5, 10_000)).slice(before);
    expect(receipts.map((x) => x.verifyError)).toEqual([null, null, null, null, null]);
    expect(receipts.map((x) => x.event!.data.request_id).sort()).toEqual([...ids].sort());
    expect(claims()).toEqual([]);
    // Recorded by group commit: each delivery succeeded after one attempt, with its attempt row.
    let deliveries: any[] = [];
    for (let i = 0; i < 50 && !(deliveries.length === 5 && deliveries.every((d) => d.status === 'succeeded')); i++) {
      deliveries = await deliveriesOf(operator, webhook.id);
      await new Promise((res) => setTimeout(res, 20));
    }
    expect(deliveries.map((d) => [d.status, d.attempts, d.response_status])).toEqual(Array(5).fill(['succeeded', 1, 200]));
    expect(await t.deps.db.webhookAttempt.count({ where: { deliveryId: { in: deliveries.map((d) => d.id) } } })).toBe(5);
  });

  it('is claimed by any worker once its lease runs out when the writer died before sending it', async () => {
    const { project, webhook } = await subscribedProject();
    const now = new Date(t.clock.now());
    const outcome = testOutcome(project.projectId, project.keyId, now);
    // Written leased to a worker that then died: nobody was handed the delivery.
    const { leased } = await persistOutcomes({ sql: t.deps.database.sql, sealer: t.deps.webhooks.secretBox }, [outcome], now, { leaseUntil: new Date(now.getTime() + 15_000) });
    expect(leased.map((d) => d.webhookId)).toEqual([webhook.id]);

    const other = testWorker(t);
    const mine = <T extends { webhookId: string }>(outcomes: T[]) => outcomes.filter((o) => o.webhookId === webhook.id);
    expect(mine(await other.runDue())).toEqual([]);
    t.clock.ms += 15_000;
    const sent = mine(await other.runDue());
    expect(sent.map((o) => [o.deliveryId, o.status, o.attempt])).toEqual([[leased[0]!.id, 'succeeded', 1]]);
    const receipt = r.receipts.find((x) => x.deliveryId === leased[0]!.id);
    expect(receipt?.event).toMatchObject({ id: outcome.eventId, type: 'inference.completed', data: { request_id: outcome.requestId } });
  });
});
