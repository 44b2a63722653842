import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MASTER_KEY, buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { startReceiver, type Receiver } from '../helpers/https-receiver.ts';
import { expectHiddenFrom, expectScopeRequired } from '../helpers/security.ts';
import { createWebhook, deliveriesOf, emitKeyRotated, testWorker, webhookEnv } from './support.ts';

let t: TestApp;
let operator: Client;
let r: Receiver;

beforeAll(async () => {
  t = await buildTestApp({ env: webhookEnv() });
  operator = client(t.app);
  r = await startReceiver();
});
afterAll(async () => {
  await r.close();
  await t.close();
});

/** A project with a webhook and one failed delivery (so that replay has something to act on). */
async function projectWithDelivery() {
  const project = await seedProject(operator);
  const webhook = await createWebhook(operator, { project_id: project.projectId, url: r.url, events: ['key.rotated'] });
  // Rotate a second key: the seeded key's secret must keep working for the probes.
  const spare = await operator.post('/v1/keys', { project_id: project.projectId, name: 'spare', scopes: ['keys:manage'] });
  await emitKeyRotated(operator, spare.body.id);
  const [delivery] = await deliveriesOf(operator, webhook.id);
  await t.deps.db.webhookDelivery.update({ where: { id: delivery.id }, data: { status: 'failed', nextAttemptAt: null } });
  return { ...project, webhook, deliveryId: delivery.id as string };
}

describe('scopes', () => {
  it('requires governance:manage on every webhook route', async () => {
    const p = await projectWithDelivery();
    const weak = await operator.post('/v1/keys', {
      project_id: p.projectId,
      name: 'no-governance',
      scopes: ['keys:manage', 'audit:read', 'inference:write'],
    });
    await expectScopeRequired(client(t.app, weak.body.secret), [
      { method: 'post', url: '/v1/webhooks', body: { project_id: p.projectId, url: r.url, events: ['key.rotated'] } },
      { method: 'get', url: '/v1/webhooks' },
      { method: 'get', url: `/v1/webhooks/${p.webhook.id}` },
      { method: 'post', url: `/v1/webhooks/${p.webhook.id}/disable` },
      { method: 'get', url: `/v1/webhooks/${p.webhook.id}/deliveries` },
      { method: 'post', url: `/v1/webhooks/${p.webhook.id}/deliveries/${p.deliveryId}/replay` },
    ]);
    // Nothing changed.
    expect((await operator.get(`/v1/webhooks/${p.webhook.id}`)).body.status).toBe('active');
    expect((await deliveriesOf(operator, p.webhook.id)).map((d) => d.id)).toEqual([p.deliveryId]);
  });
});

describe('tenant isolation', () => {
  it("answers not_found for another project's webhooks and deliveries", async () => {
    const mine = await projectWithDelivery();
    const theirs = await projectWithDelivery();
    const api = client(t.app, mine.secret);
    await expectHiddenFrom(api, [
      { method: 'get', url: `/v1/webhooks/${theirs.webhook.id}` },
      { method: 'post', url: `/v1/webhooks/${theirs.webhook.id}/disable` },
      { method: 'get', url: `/v1/webhooks/${theirs.webhook.id}/deliveries` },
      { method: 'post', url: `/v1/webhooks/${theirs.webhook.id}/deliveries/${theirs.deliveryId}/replay` },
      { method: 'post', url: `/v1/webhooks/${mine.webhook.id}/deliveries/${theirs.deliveryId}/replay` },
      { method: 'get', url: `/v1/webhooks?project_id=${theirs.projectId}` },
      { method: 'get', url: '/v1/webhooks', headers: { 'x-svc-project': theirs.projectId } },
      { method: 'post', url: '/v1/webhooks', body: { project_id: theirs.projectId, url: r.url, events: ['key.rotated'] } },
    ]);
    expect((await operator.get(`/v1/webhooks/${theirs.webhook.id}`)).body.status).toBe('active');
    expect((await deliveriesOf(operator, theirs.webhook.id)).map((d) => d.id)).toEqual([theirs.deliveryId]);
    expect((await operator.get('/v1/webhooks', { query: { project_id: theirs.projectId } })).body.data).toHaveLength(1);
  });
});

describe('signing secrets', () => {
  it('are stored encrypted, bound to their webhook, and never shown or logged after creation', async () => {
    const p = await projectWithDelivery();
    const row = await t.deps.db.webhook.findUniqueOrThrow({ where: { id: p.webhook.id } });
    expect(row.secretEncrypted).not.toContain(p.webhook.secret);
    expect(row.secretEncrypted.split('.')).toHaveLength(3);
    expect(t.deps.webhooks.secretBox.open(row.secretEncrypted, p.webhook.id)).toBe(p.webhook.secret);
    // AES-GCM with the webhook id as associated data: the ciphertext does not open for another webhook.
    expect(() => t.deps.webhooks.secretBox.open(row.secretEncrypted, 'wh_other')).toThrow();

    const later = [
      await operator.get(`/v1/webhooks/${p.webhook.id}`),
      await operator.get('/v1/webhooks', { query: { project_id: p.projectId } }),
      await operator.get(`/v1/webhooks/${p.webhook.id}/deliveries`),
      await operator.get('/v1/audit/events', { query: { project_id: p.projectId, limit: 100 } }),
      await operator.post(`/v1/webhooks/${p.webhook.id}/deliveries/${p.deliveryId}/replay`),
      await operator.post(`/v1/webhooks/${p.webhook.id}/disable`),
    ];
    for (const res of later) {
      expect(res.status).toBe(200);
      expect(res.raw).not.toContain(p.webhook.secret);
    }
    expect(t.logs.text).not.toContain(p.webhook.secret);
    expect(t.logs.text).not.toContain(MASTER_KEY);
  });

  it('a ciphertext copied onto another webhook does not sign for it: the attempt fails and nothing is sent', async () => {
    const a = await projectWithDelivery();
    const b = await seedProject(operator);
    const hookB = await createWebhook(operator, { project_id: b.projectId, url: r.url, events: ['key.rotated'] });
    const stolen = await t.deps.db.webhook.findUniqueOrThrow({ where: { id: a.webhook.id } });
    await t.deps.db.webhook.update({ where: { id: hookB.id }, data: { secretEncrypted: stolen.secretEncrypted } });
    await emitKeyRotated(operator, b.keyId);
    const worker = testWorker(t);
    const outcomes = (await worker.runDue()).filter((o) => o.webhookId === hookB.id);
    await worker.stop();
    expect(outcomes).toHaveLength(1);
    expect(outcomes[0]).toMatchObject({ status: 'retrying', responseStatus: null });
    expect(outcomes[0]!.error).toMatch(/authenticate/);
    expect(r.receipts.filter((x) => x.headers['x-svc-webhook-id'] === hookB.id)).toEqual([]);
  });
});
