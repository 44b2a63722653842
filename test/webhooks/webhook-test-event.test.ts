import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { startReceiver, type Receiver } from '../helpers/https-receiver.ts';
import { expectHiddenFrom, expectScopeRequired } from '../helpers/security.ts';
import { expectGqlError, expectGqlHiddenFrom, expectGqlScopeRequired, gqlClient, type Gql } from '../graphql/gql.ts';
import { createWebhook, deliveriesOf, testWorker, webhookEnv } from './support.ts';

/**
 * Issue 36, "send a test event": POST /v1/webhooks/{id}/test and GraphQL sendWebhookTestEvent send one signed
 * webhook.test event to that webhook only, through the outbox and the delivery worker like every event.
 */
let t: TestApp;
let operator: Client;
let gql: Gql;
const receivers: Receiver[] = [];

beforeAll(async () => {
  t = await buildTestApp({ env: webhookEnv() });
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await t.close();
});

const SEND = `mutation($id: ID!) { sendWebhookTestEvent(webhookId: $id) { id type projectId data createdAt } }`;

/**
 * A project with two webhooks on two receivers: `target` subscribes to key.revoked only, `other` to every event type
 * (webhook.test included). A test event sent to `target` must reach it, and never `other`.
 */
async function twoWebhooks() {
  const project = await seedProject(operator, { scopes: ['governance:manage'] });
  const api = client(t.app, project.secret);
  const [r1, r2] = await Promise.all([startReceiver(), startReceiver()]);
  receivers.push(r1, r2);
  const target = await createWebhook(api, { project_id: project.projectId, url: r1.url, events: ['key.revoked'] });
  const other = await createWebhook(api, { project_id: project.projectId, url: r2.url, events: ['key.revoked', 'key.rotated', 'webhook.test'] });
  r1.secret = target.secret;
  r2.secret = other.secret;
  return { project, api, target, other, r1, r2 };
}

/** Runs the worker once and returns what each receiver got (only this file's deliveries are due). */
async function deliverDue() {
  const worker = testWorker(t);
  await worker.runDue();
  await worker.stop();
}

function expectOneSignedTestEvent(r: Receiver, webhook: { id: string; secret: string }, projectId: string, eventId: string) {
  expect(r.receipts).toHaveLength(1);
  const [got] = r.receipts;
  // Stripe's own verifier accepted it (the receiver ran constructEvent with the webhook's secret).
  expect(got!.verifyError).toBeNull();
  expect(got!.headers['x-svc-event']).toBe('webhook.test');
  expect(got!.headers['x-svc-webhook-id']).toBe(webhook.id);
  const envelope = JSON.parse(got!.rawBody);
  expect(envelope).toEqual({
    id: eventId,
    object: 'svc.webhook.event',
    type: 'webhook.test',
    created_at: Math.floor(t.clock.now() / 1000),
    project_id: projectId,
    data: { webhook_id: webhook.id, message: expect.stringMatching(/test event/) },
  });
  expect(got!.event).toEqual(envelope);
  const stripe = new Stripe('sk_test_x');
  expect(() => stripe.webhooks.constructEvent(got!.rawBody, String(got!.headers['x-svc-signature']), 'whsec_other')).toThrow(/signature/i);
}

describe('POST /v1/webhooks/{id}/test', () => {
  it('delivers exactly one signed webhook.test to that webhook and none to another webhook of the project', async () => {
    const { project, api, target, other, r1, r2 } = await twoWebhooks();
    const res = await api.post(`/v1/webhooks/${target.id}/test`);
    expect(res.status, res.raw).toBe(200);
    expect(Object.keys(res.body)).toEqual(['id', 'object', 'type', 'created_at', 'project_id', 'data']);
    expect(res.body).toMatchObject({ object: 'svc.webhook.event', type: 'webhook.test', project_id: project.projectId });
    expect(res.body.id).toMatch(/^evt_/);
    expect(res.body.data).toEqual({ webhook_id: target.id, message: expect.any(String) });

    // One pending delivery of that event on the target; nothing on the other webhook.
    const [delivery, ...more] = await deliveriesOf(api, target.id);
    expect(more).toHaveLength(0);
    expect(delivery).toMatchObject({ event_id: res.body.id, event_type: 'webhook.test', status: 'pending', attempts: 0 });
    expect(await deliveriesOf(api, other.id)).toHaveLength(0);

    await deliverDue();
    expectOneSignedTestEvent(r1, target, project.projectId, res.body.id);
    expect(r1.receipts[0]!.headers['x-svc-delivery-id']).toBe(delivery.id);
    expect(r2.receipts).toHaveLength(0);
    const [after] = await deliveriesOf(api, target.id);
    expect(after).toMatchObject({ id: delivery.id, status: 'succeeded', attempts: 1, response_status: 200 });
  });

  it('refuses a disabled webhook: 400 invalid_request webhook_id, nothing delivered', async () => {
    const { api, target, r1 } = await twoWebhooks();
    expect((await api.post(`/v1/webhooks/${target.id}/disable`)).status).toBe(200);
    const res = await api.post(`/v1/webhooks/${target.id}/test`);
    expectError(res, 400, 'invalid_request', 'webhook_id');
    expect(await deliveriesOf(api, target.id)).toHaveLength(0);
    await deliverDue();
    expect(r1.receipts).toHaveLength(0);
  });

  it('needs governance:manage; another project\'s webhook and an unknown id are 404 not_found', async () => {
    const { target } = await twoWebhooks();
    const scopeless = await seedProject(operator, { scopes: ['usage:read'] });
    await expectScopeRequired(client(t.app, scopeless.secret), [{ method: 'post', url: `/v1/webhooks/${target.id}/test` }]);
    const stranger = await seedProject(operator, { scopes: ['governance:manage'] });
    await expectHiddenFrom(client(t.app, stranger.secret), [
      { method: 'post', url: `/v1/webhooks/${target.id}/test` },
      { method: 'post', url: '/v1/webhooks/wh_doesnotexist/test' },
    ]);
    expect(await deliveriesOf(operator, target.id)).toHaveLength(0);
  });
});

describe('GraphQL sendWebhookTestEvent', () => {
  it('delivers exactly one signed webhook.test to that webhook and none to another webhook of the project', async () => {
    const { project, target, other, r1, r2 } = await twoWebhooks();
    const res = await gql(SEND, { id: target.id }, { key: project.secret });
    expect(res.body.errors, res.raw).toBeUndefined();
    const event = res.body.data.sendWebhookTestEvent;
    expect(event).toEqual({
      id: expect.stringMatching(/^evt_/),
      type: 'webhook.test',
      projectId: project.projectId,
      data: { webhook_id: target.id, message: expect.any(String) },
      createdAt: Math.floor(t.clock.now() / 1000),
    });
    expect(await deliveriesOf(operator, other.id)).toHaveLength(0);
    await deliverDue();
    expectOneSignedTestEvent(r1, target, project.projectId, event.id);
    expect(r2.receipts).toHaveLength(0);
  });

  it('refuses a disabled webhook as REST does', async () => {
    const { project, api, target } = await twoWebhooks();
    expect((await api.post(`/v1/webhooks/${target.id}/disable`)).status).toBe(200);
    const res = await gql(SEND, { id: target.id }, { key: project.secret });
    expectGqlError(res, 'invalid_request', { param: 'webhook_id', httpStatus: 400, path: ['sendWebhookTestEvent'] });
    expect(await deliveriesOf(operator, target.id)).toHaveLength(0);
  });

  it('needs governance:manage; another project\'s webhook is not_found', async () => {
    const { target } = await twoWebhooks();
    const scopeless = await seedProject(operator, { scopes: ['usage:read'] });
    await expectGqlScopeRequired(gql, scopeless.secret, [{ field: 'sendWebhookTestEvent', query: SEND, variables: { id: target.id } }]);
    const stranger = await seedProject(operator, { scopes: ['governance:manage'] });
    await expectGqlHiddenFrom(gql, stranger.secret, [{ field: 'sendWebhookTestEvent', query: SEND, variables: { id: target.id } }]);
    expect(await deliveriesOf(operator, target.id)).toHaveLength(0);
  });
});

describe('the event catalog', () => {
  it('lists webhook.test: a webhook may subscribe to it, though it needs not to receive it', async () => {
    const project = await seedProject(operator, { scopes: ['governance:manage'] });
    const res = await client(t.app, project.secret).post('/v1/webhooks', { project_id: project.projectId, url: 'https://127.0.0.1:9/hook', events: ['webhook.test'] });
    expect(res.status, res.raw).toBe(200);
    expect(res.body.events).toEqual(['webhook.test']);
  });
});
