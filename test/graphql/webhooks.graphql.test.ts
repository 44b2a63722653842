import type { LookupAddress } from 'node:dns';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { EgressPolicy, UNREACHABLE_HOST } from '../../src/kernel/egress.ts';
import { webhookEnv } from '../webhooks/support.ts';
import { expectGqlError, expectGqlHiddenFrom, expectGqlScopeRequired, gqlClient, type Gql } from './gql.ts';

let t: TestApp;
let operator: Client;
let gql: Gql;

beforeAll(async () => {
  t = await buildTestApp({ env: webhookEnv() });
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(() => t.close());

const CREATE = `mutation($i: CreateWebhookInput!) { createWebhook(input: $i) { secret webhook { id url events status createdAt projectId project { id } } } }`;
const DELIVERY_FIELDS = 'id webhookId eventId eventType status attempts lastAttemptAt nextAttemptAt responseStatus createdAt';

async function projectWithWebhook(events = ['key.revoked']) {
  const seeded = await seedProject(operator, { scopes: ['keys:manage', 'governance:manage'] });
  const res = await gql(CREATE, { i: { projectId: seeded.projectId, url: 'https://127.0.0.1:9/hook', events } }, { key: seeded.secret });
  expect(res.body.errors, res.raw).toBeUndefined();
  return { ...seeded, webhook: res.body.data.createWebhook.webhook, signingSecret: res.body.data.createWebhook.secret };
}

/** Revokes a fresh key of the project: one key.revoked event, so one pending delivery per subscribed webhook. */
async function emitKeyRevoked(projectId: string): Promise<void> {
  const key = await operator.post('/v1/keys', { project_id: projectId, name: `k${Math.random()}`, scopes: ['usage:read'] });
  await operator.post(`/v1/keys/${key.body.id}/revoke`);
}

describe('webhooks', () => {
  it('creates a webhook; the signing secret only in the payload', async () => {
    const { projectId, secret, webhook, signingSecret } = await projectWithWebhook(['key.revoked', 'key.rotated']);
    expect(signingSecret).toMatch(/^whsec_/);
    expect(webhook).toMatchObject({
      url: 'https://127.0.0.1:9/hook',
      events: ['key.revoked', 'key.rotated'],
      status: 'active',
      createdAt: Math.floor(t.clock.now() / 1000),
      projectId,
      project: { id: projectId },
    });
    const read = await gql(`query($id: ID!) { webhook(id: $id) { id url } }`, { id: webhook.id }, { key: secret });
    expect(read.body.data.webhook).toEqual({ id: webhook.id, url: webhook.url });
    expect(read.raw).not.toContain(signingSecret);
    const audit = await operator.get('/v1/audit/events', { query: { project_id: projectId, action: 'webhook.create' } });
    expect(audit.body.data).toHaveLength(1);
  });

  it('lists webhooks newest first, as REST', async () => {
    const { projectId, secret, webhook: first } = await projectWithWebhook();
    t.clock.advance(1000);
    const second = (await gql(CREATE, { i: { projectId, url: 'https://127.0.0.1:9/b', events: ['key.rotated'] } }, { key: secret })).body.data.createWebhook.webhook;
    const res = await gql(`{ webhooks(first: 1) { edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }`, {}, { key: secret });
    expect(res.body.data.webhooks.edges).toEqual([{ cursor: second.id, node: { id: second.id } }]);
    expect(res.body.data.webhooks.pageInfo).toEqual({ hasNextPage: true, endCursor: second.id });
    const next = await gql(`query($a: String) { webhooks(first: 1, after: $a) { edges { node { id } } } }`, { a: second.id }, { key: secret });
    expect(next.body.data.webhooks.edges).toEqual([{ node: { id: first.id } }]);
    const rest = await client(t.app, secret).get('/v1/webhooks');
    expect(rest.body.data.map((w: any) => w.id)).toEqual([second.id, first.id]);
  });

  it("pages a webhook's deliveries newest first, with their attempts and event", async () => {
    const { projectId, secret, webhook } = await projectWithWebhook();
    for (let i = 0; i < 3; i++) {
      t.clock.advance(1000);
      await emitKeyRevoked(projectId);
    }
    const q = `query($id: ID!, $first: Int, $after: String, $last: Int, $before: String) {
      webhook(id: $id) { deliveries(first: $first, after: $after, last: $last, before: $before) {
        edges { cursor node { ${DELIVERY_FIELDS} attemptLog { attempt } event { id type data projectId createdAt } webhook { id } } }
        pageInfo { hasNextPage hasPreviousPage }
      } }
    }`;
    const page = await gql(q, { id: webhook.id, first: 2 }, { key: secret });
    const edges = page.body.data.webhook.deliveries.edges;
    expect(edges).toHaveLength(2);
    expect(edges[0].node).toMatchObject({ webhookId: webhook.id, eventType: 'key.revoked', status: 'pending', attempts: 0, attemptLog: [], webhook: { id: webhook.id } });
    expect(edges[0].node.event).toMatchObject({ type: 'key.revoked', projectId });
    expect(edges[0].node.event.data.key_id).toMatch(/^key_/);
    expect(page.body.data.webhook.deliveries.pageInfo).toEqual({ hasNextPage: true, hasPreviousPage: false });

    const rest = await client(t.app, secret).get(`/v1/webhooks/${webhook.id}/deliveries`);
    const restIds = rest.body.data.map((d: any) => d.id);
    expect(edges.map((e: any) => e.cursor)).toEqual(restIds.slice(0, 2));

    const next = await gql(q, { id: webhook.id, first: 2, after: edges[1].cursor }, { key: secret });
    expect(next.body.data.webhook.deliveries.edges.map((e: any) => e.node.id)).toEqual(restIds.slice(2));
    const back = await gql(q, { id: webhook.id, last: 1, before: restIds[2] }, { key: secret });
    expect(back.body.data.webhook.deliveries.edges.map((e: any) => e.node.id)).toEqual([restIds[1]]);

    const tooMany = await gql(q, { id: webhook.id, first: 101 }, { key: secret });
    expectGqlError(tooMany, 'invalid_request', { param: 'first', httpStatus: 400 });
  });

  it("pages a webhook's deliveries when only cursors or page info are asked for", async () => {
    const { projectId, secret, webhook } = await projectWithWebhook();
    await emitKeyRevoked(projectId);
    await emitKeyRevoked(projectId);
    const ids = (await operator.get(`/v1/webhooks/${webhook.id}/deliveries`)).body.data.map((d: { id: string }) => d.id);
    expect(ids).toHaveLength(2);
    const res = await gql(
      `query($id: ID!) { webhook(id: $id) { deliveries(first: 1) { edges { cursor } pageInfo { hasNextPage endCursor } } } }`,
      { id: webhook.id },
      { key: secret },
    );
    expect(res.body.errors, res.raw).toBeUndefined();
    expect(res.body.data.webhook.deliveries).toEqual({ edges: [{ cursor: ids[0] }], pageInfo: { hasNextPage: true, endCursor: ids[0] } });
    const only = await gql(`{ webhooks { edges { node { deliveries { pageInfo { hasNextPage } } } } } }`, {}, { key: secret });
    expect(only.body.errors, only.raw).toBeUndefined();
    expect(only.body.data.webhooks.edges).toEqual([{ node: { deliveries: { pageInfo: { hasNextPage: false } } } }]);
  });

  it('reads one delivery and replays it once it failed', async () => {
    const { projectId, secret, webhook } = await projectWithWebhook();
    await emitKeyRevoked(projectId);
    const [delivery] = await t.deps.db.webhookDelivery.findMany({ where: { webhookId: webhook.id } });
    const one = `query($w: ID!, $id: ID!) { delivery(webhookId: $w, id: $id) { ${DELIVERY_FIELDS} attemptLog { attempt responseStatus error } } }`;
    const read = await gql(one, { w: webhook.id, id: delivery!.id }, { key: secret });
    expect(read.body.data.delivery).toMatchObject({ id: delivery!.id, status: 'pending' });

    const REPLAY = `mutation($w: ID!, $d: ID!) { replayDelivery(webhookId: $w, deliveryId: $d) { ${DELIVERY_FIELDS} } }`;
    const early = await gql(REPLAY, { w: webhook.id, d: delivery!.id }, { key: secret });
    expectGqlError(early, 'invalid_request', { param: 'delivery_id', httpStatus: 400 });

    await t.deps.db.webhookDelivery.update({ where: { id: delivery!.id }, data: { status: 'failed', attempts: 1 } });
    await t.deps.db.webhookAttempt.create({
      data: { id: `att_${delivery!.id.slice(4)}`, deliveryId: delivery!.id, attempt: 1, attemptedAt: new Date(t.clock.now()), responseStatus: 503, durationMs: 40 },
    });
    const failed = await gql(one, { w: webhook.id, id: delivery!.id }, { key: secret });
    expect(failed.body.data.delivery.attemptLog).toEqual([{ attempt: 1, responseStatus: 503, error: null }]);

    const replay = await gql(REPLAY, { w: webhook.id, d: delivery!.id }, { key: secret });
    const replayed = replay.body.data.replayDelivery;
    expect(replayed).toMatchObject({ webhookId: webhook.id, eventId: delivery!.eventId, status: 'pending', attempts: 0 });
    expect(replayed.id).not.toBe(delivery!.id);
    const audit = await operator.get('/v1/audit/events', { query: { project_id: projectId, action: 'webhook.delivery.replay' } });
    expect(audit.body.data[0].target_id).toBe(replayed.id);
  });

  it('disables a webhook, idempotently', async () => {
    const { secret, webhook } = await projectWithWebhook();
    const DISABLE = `mutation($id: ID!) { disableWebhook(id: $id) { id status } }`;
    const first = await gql(DISABLE, { id: webhook.id }, { key: secret });
    expect(first.body.data.disableWebhook).toEqual({ id: webhook.id, status: 'disabled' });
    const again = await gql(DISABLE, { id: webhook.id }, { key: secret });
    expect(again.body.data.disableWebhook).toEqual({ id: webhook.id, status: 'disabled' });
  });
});

describe('errors', () => {
  it('answers invalid_request for a bad url or event type, and not_found for unknown ids', async () => {
    const { projectId, secret, webhook } = await projectWithWebhook();
    const bad = async (input: Record<string, unknown>, param: string) =>
      expectGqlError(await gql(CREATE, { i: { projectId, ...input } }, { key: secret }), 'invalid_request', { param, httpStatus: 400 });
    await bad({ url: 'http://127.0.0.1:9/x', events: ['key.revoked'] }, 'url');
    await bad({ url: 'https://127.0.0.1:9/x', events: ['no.such'] }, 'events');
    await bad({ url: 'https://127.0.0.1:9/x', events: [] }, 'events');
    for (const [query, field, param] of [
      [`{ webhook(id: "wh_nope") { id } }`, 'webhook', 'webhook_id'],
      [`mutation { disableWebhook(id: "wh_nope") { id } }`, 'disableWebhook', 'webhook_id'],
      [`{ delivery(webhookId: "${webhook.id}", id: "del_nope") { id } }`, 'delivery', 'delivery_id'],
      [`mutation { replayDelivery(webhookId: "${webhook.id}", deliveryId: "del_nope") { id } }`, 'replayDelivery', 'delivery_id'],
    ] as const) {
      expectGqlError(await gql(query, {}, { key: secret }), 'not_found', { param, httpStatus: 404, path: [field] });
    }
  });
});

describe('hardening (issue 14)', () => {
  const createAt = (url: string, projectId: string, key: string) => gql(CREATE, { i: { projectId, url, events: ['key.revoked'] } }, { key });

  it('refuses loopback names up front, and answers "does not resolve" and "resolves privately" alike', async () => {
    const { projectId, secret } = await seedProject(operator, { scopes: ['governance:manage'] });
    const saved = t.deps.webhooks.egress;
    const zone: Record<string, string> = { 'internal.example.com': '10.0.0.8', 'public.example.com': '93.184.216.34', 'x.localhost': '93.184.216.34' };
    t.deps.webhooks.egress = new EgressPolicy([], async (host): Promise<LookupAddress[]> => {
      if (!zone[host]) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
      return [{ address: zone[host]!, family: 4 }];
    });
    try {
      for (const url of ['https://localhost./x', 'https://x.localhost/x', 'https://localhost.localdomain/x', 'https://ip6-localhost/x']) {
        const res = await createAt(url, projectId, secret);
        expect(res.body.data.createWebhook, url).toBeNull();
        const err = expectGqlError(res, 'invalid_request', { httpStatus: 400, param: 'url', path: ['createWebhook'] });
        expect(err.message).toMatch(/loopback name/);
      }
      const unresolved = expectGqlError(await createAt('https://nowhere.example.com/x', projectId, secret), 'invalid_request', { param: 'url' });
      const internal = expectGqlError(await createAt('https://internal.example.com/x', projectId, secret), 'invalid_request', { param: 'url' });
      expect(unresolved.message).toBe(internal.message);
      expect(internal.message).toBe(UNREACHABLE_HOST);
      expect((await createAt('https://public.example.com/x', projectId, secret)).body.data.createWebhook.webhook.url).toBe('https://public.example.com/x');
    } finally {
      t.deps.webhooks.egress = saved;
    }
  });

  it('caps active webhooks per project (SVC_MAX_WEBHOOKS_PER_PROJECT, 16): disabled ones do not count', async () => {
    const { projectId, secret } = await seedProject(operator, { scopes: ['governance:manage'] });
    const ids: string[] = [];
    for (let i = 0; i < 16; i++) {
      const res = await createAt(`https://127.0.0.1:9/gql-cap/${i}`, projectId, secret);
      expect(res.body.errors, res.raw).toBeUndefined();
      ids.push(res.body.data.createWebhook.webhook.id);
    }
    const refused = await createAt('https://127.0.0.1:9/gql-cap/16', projectId, secret);
    expect(refused.body.data.createWebhook).toBeNull();
    const err = expectGqlError(refused, 'invalid_request', { httpStatus: 400, param: 'url', path: ['createWebhook'] });
    expect(err.message).toMatch(/already has 16 active webhooks/);
    const disabled = await gql(`mutation($id: ID!) { disableWebhook(id: $id) { status } }`, { id: ids[0] }, { key: secret });
    expect(disabled.body.data.disableWebhook.status).toBe('disabled');
    expect((await createAt('https://127.0.0.1:9/gql-cap/17', projectId, secret)).body.errors).toBeUndefined();
  });
});

describe('security', () => {
  it('requires governance:manage on every webhook field', async () => {
    const { projectId, webhook } = await projectWithWebhook();
    const weak = (await operator.post('/v1/keys', { project_id: projectId, name: 'weak', scopes: ['keys:manage'] })).body.secret;
    await expectGqlScopeRequired(gql, weak, [
      { field: 'webhooks', query: '{ webhooks { edges { cursor } } }' },
      { field: 'webhook', query: `{ webhook(id: "${webhook.id}") { id } }` },
      { field: 'delivery', query: `{ delivery(webhookId: "${webhook.id}", id: "del_x") { id } }` },
      { field: 'createWebhook', query: CREATE, variables: { i: { projectId, url: 'https://127.0.0.1:9/x', events: ['key.revoked'] } } },
      { field: 'disableWebhook', query: `mutation { disableWebhook(id: "${webhook.id}") { id } }` },
      { field: 'replayDelivery', query: `mutation { replayDelivery(webhookId: "${webhook.id}", deliveryId: "del_x") { id } }` },
    ]);
    const still = await operator.get(`/v1/webhooks/${webhook.id}`);
    expect(still.body.status).toBe('active');
  });

  it("answers not_found for another project's webhooks and deliveries", async () => {
    const mine = await projectWithWebhook();
    const theirs = await projectWithWebhook();
    await emitKeyRevoked(theirs.projectId);
    const [theirDelivery] = await t.deps.db.webhookDelivery.findMany({ where: { webhookId: theirs.webhook.id } });
    await expectGqlHiddenFrom(gql, mine.secret, [
      { field: 'webhook', query: `{ webhook(id: "${theirs.webhook.id}") { id deliveries { edges { cursor } } } }` },
      { field: 'delivery', query: `{ delivery(webhookId: "${theirs.webhook.id}", id: "${theirDelivery!.id}") { id } }` },
      // Their delivery under my webhook is no delivery of mine either.
      { field: 'delivery', query: `{ delivery(webhookId: "${mine.webhook.id}", id: "${theirDelivery!.id}") { id } }` },
      { field: 'webhooks', query: `{ webhooks(projectId: "${theirs.projectId}") { edges { cursor } } }` },
      { field: 'disableWebhook', query: `mutation { disableWebhook(id: "${theirs.webhook.id}") { id } }` },
      { field: 'replayDelivery', query: `mutation { replayDelivery(webhookId: "${theirs.webhook.id}", deliveryId: "${theirDelivery!.id}") { id } }` },
      { field: 'createWebhook', query: CREATE, variables: { i: { projectId: theirs.projectId, url: 'https://127.0.0.1:9/x', events: ['key.revoked'] } } },
    ]);
    const list = await gql('{ webhooks { edges { node { id } } } }', {}, { key: mine.secret });
    expect(list.body.data.webhooks.edges).toEqual([{ node: { id: mine.webhook.id } }]);
    expect((await operator.get(`/v1/webhooks/${theirs.webhook.id}`)).body.status).toBe('active');
  });
});
