import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { expectGqlError, gqlClient } from '../graphql/gql.ts';
import { webhookEnv } from './support.ts';

/** SVC_MAX_WEBHOOKS_PER_PROJECT (issue 14): one event fans out to every subscribed webhook, so a project has a cap. */
let t: TestApp;
let capped: TestApp;
let operator: Client;

beforeAll(async () => {
  t = await buildTestApp({ env: webhookEnv() });
  capped = await buildTestApp({ env: { ...webhookEnv(), SVC_MAX_WEBHOOKS_PER_PROJECT: '2' } });
  operator = client(t.app);
});
afterAll(async () => {
  await t.close();
  await capped.close();
});

const url = (n: number | string) => `https://127.0.0.1:9/cap/${n}`;
const CAP_MESSAGE = /already has 16 active webhooks.*SVC_MAX_WEBHOOKS_PER_PROJECT/;

describe('webhooks per project', () => {
  it('are at most 16 active by default: the 17th is 400 invalid_request param url, on REST and GraphQL', async () => {
    const { projectId, secret } = await seedProject(operator);
    const api = client(t.app, secret);
    for (let i = 0; i < 16; i++) {
      const res = await api.post('/v1/webhooks', { project_id: projectId, url: url(i), events: ['key.rotated'] });
      expect(res.status, res.raw).toBe(200);
    }
    const refused = await api.post('/v1/webhooks', { project_id: projectId, url: url(16), events: ['key.rotated'] });
    expectError(refused, 400, 'invalid_request', 'url');
    expect(refused.body.error.message).toMatch(CAP_MESSAGE);

    const gql = gqlClient(t.app, secret);
    const viaGraphql = await gql(`mutation($i: CreateWebhookInput!) { createWebhook(input: $i) { secret webhook { id } } }`, {
      i: { projectId, url: url('g'), events: ['key.rotated'] },
    });
    expect(viaGraphql.body.data.createWebhook).toBeNull();
    const err = expectGqlError(viaGraphql, 'invalid_request', { httpStatus: 400, param: 'url', path: ['createWebhook'] });
    expect(err.message).toMatch(CAP_MESSAGE);

    const listed = await api.get('/v1/webhooks', { query: { limit: 100 } });
    expect(listed.body.data).toHaveLength(16);
    expect(await t.deps.db.auditEvent.count({ where: { projectId, action: 'webhook.create' } })).toBe(16);

    // Another project has its own 16.
    const other = await seedProject(operator);
    expect((await operator.post('/v1/webhooks', { project_id: other.projectId, url: url('other'), events: ['key.rotated'] })).status).toBe(200);

    // Disabled webhooks do not count: disabling one makes room for one.
    expect((await api.post(`/v1/webhooks/${listed.body.data[0].id}/disable`)).status).toBe(200);
    expect((await api.post('/v1/webhooks', { project_id: projectId, url: url('after-disable'), events: ['key.rotated'] })).status).toBe(200);
    expectError(await api.post('/v1/webhooks', { project_id: projectId, url: url('again'), events: ['key.rotated'] }), 400, 'invalid_request', 'url');
  });

  it('follow SVC_MAX_WEBHOOKS_PER_PROJECT, also when creates race', async () => {
    const api = client(capped.app);
    const { projectId } = await seedProject(api);
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => api.post('/v1/webhooks', { project_id: projectId, url: url(`race-${i}`), events: ['key.rotated'] })),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(2);
    for (const r of results.filter((r) => r.status !== 200)) {
      expectError(r, 400, 'invalid_request', 'url');
      expect(r.body.error.message).toMatch(/already has 2 active webhooks/);
    }
    expect(await capped.deps.db.webhook.count({ where: { projectId, status: 'active' } })).toBe(2);
  });
});
