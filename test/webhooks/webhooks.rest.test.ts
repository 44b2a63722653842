import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { createWebhook, emitKeyRotated, webhookEnv } from './support.ts';

let t: TestApp;
let operator: Client;
const url = (n: number | string = 1) => `https://127.0.0.1:9/hooks/${n}`;

beforeAll(async () => {
  t = await buildTestApp({ env: webhookEnv() });
  operator = client(t.app);
});
afterAll(() => t.close());

describe('POST /v1/webhooks', () => {
  it('returns the webhook with its signing secret, once', async () => {
    const { projectId, secret } = await seedProject(operator);
    const api = client(t.app, secret);
    const res = await api.post('/v1/webhooks', {
      project_id: projectId,
      url: url(),
      events: ['key.rotated', 'policy.updated', 'key.rotated'],
    });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body)).toEqual(['id', 'object', 'url', 'events', 'status', 'created_at', 'secret']);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^wh_[0-9a-z]{26}$/),
      object: 'svc.webhook',
      url: url(),
      events: ['key.rotated', 'policy.updated'],
      status: 'active',
      created_at: Math.floor(t.clock.now() / 1000),
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9_-]{43}$/),
    });

    const got = await api.get(`/v1/webhooks/${res.body.id}`);
    expect(got.status).toBe(200);
    const { secret: _shownOnce, ...withoutSecret } = res.body;
    expect(got.body).toEqual(withoutSecret);
    expect(got.raw).not.toContain(res.body.secret);

    const audit = await operator.get('/v1/audit/events', { query: { project_id: projectId, action: 'webhook.create' } });
    expect(audit.body.data).toHaveLength(1);
    expect(audit.body.data[0]).toMatchObject({ target_id: res.body.id, data: { url: url(), events: ['key.rotated', 'policy.updated'] } });
    expect(audit.raw).not.toContain(res.body.secret);
  });

  it('takes the project from X-Svc-Project when the body has none', async () => {
    const { projectId } = await seedProject(operator);
    const res = await operator.post('/v1/webhooks', { url: url(), events: ['key.revoked'] }, { headers: { 'x-svc-project': projectId } });
    expect(res.status).toBe(200);
    const list = await operator.get('/v1/webhooks', { query: { project_id: projectId } });
    expect(list.body.data.map((w: { id: string }) => w.id)).toEqual([res.body.id]);
  });

  it('replays the first response for the same Idempotency-Key, secret included, and creates one webhook', async () => {
    const { projectId } = await seedProject(operator);
    const body = { project_id: projectId, url: url(), events: ['key.rotated'] };
    const first = await operator.post('/v1/webhooks', body, { headers: { 'idempotency-key': 'wh-create-1' } });
    const second = await operator.post('/v1/webhooks', body, { headers: { 'idempotency-key': 'wh-create-1' } });
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.body).toEqual(first.body);
    const list = await operator.get('/v1/webhooks', { query: { project_id: projectId } });
    expect(list.body.data).toHaveLength(1);

    const conflict = await operator.post('/v1/webhooks', { ...body, events: ['key.revoked'] }, { headers: { 'idempotency-key': 'wh-create-1' } });
    expect(conflict.status).toBe(409);
    expect(conflict.body.error.code).toBe('idempotency_conflict');
  });
});

describe('GET /v1/webhooks', () => {
  it('lists newest first with cursor pagination and the list headers', async () => {
    const { projectId, secret } = await seedProject(operator);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await createWebhook(operator, { project_id: projectId, url: url(i), events: ['key.rotated'] })).id);
    const api = client(t.app, secret);
    const page1 = await api.get('/v1/webhooks', { query: { limit: 2 } });
    expect(page1.status).toBe(200);
    expect(page1.headers['x-svc-page-limit']).toBe('2');
    expect(page1.headers['x-svc-has-more']).toBe('true');
    expect(page1.body).toMatchObject({ object: 'list', has_more: true, url: '/v1/webhooks' });
    expect(page1.body.data.map((w: { id: string }) => w.id)).toEqual([ids[2], ids[1]]);
    expect(page1.body.data[0]).not.toHaveProperty('secret');
    const page2 = await api.get('/v1/webhooks', { query: { limit: 2, starting_after: ids[1]! } });
    expect(page2.body.data.map((w: { id: string }) => w.id)).toEqual([ids[0]]);
    expect(page2.body.has_more).toBe(false);
    expect(page2.headers['x-svc-has-more']).toBe('false');
    const back = await api.get('/v1/webhooks', { query: { ending_before: ids[0]! } });
    expect(back.body.data.map((w: { id: string }) => w.id)).toEqual([ids[2], ids[1]]);
  });

  it('shows a key its own project only, and the operator every project or the one it names', async () => {
    const a = await seedProject(operator);
    const b = await seedProject(operator);
    const wa = await createWebhook(operator, { project_id: a.projectId, url: url('a'), events: ['key.rotated'] });
    const wb = await createWebhook(operator, { project_id: b.projectId, url: url('b'), events: ['key.rotated'] });
    const mine = await client(t.app, a.secret).get('/v1/webhooks');
    expect(mine.body.data.map((w: { id: string }) => w.id)).toEqual([wa.id]);
    const all = await operator.get('/v1/webhooks', { query: { limit: 100 } });
    expect(all.body.data.map((w: { id: string }) => w.id)).toEqual(expect.arrayContaining([wa.id, wb.id]));
    const named = await operator.get('/v1/webhooks', { query: { project_id: b.projectId } });
    expect(named.body.data.map((w: { id: string }) => w.id)).toEqual([wb.id]);
    expect(named.headers['x-svc-project']).toBe(b.projectId);
  });
});

describe('GET /v1/webhooks/{id}/deliveries', () => {
  it('pages through deliveries newest first by del_ id', async () => {
    const { projectId, keyId } = await seedProject(operator);
    const webhook = await createWebhook(operator, { project_id: projectId, url: url(), events: ['key.rotated'] });
    for (let i = 0; i < 3; i++) await emitKeyRotated(operator, keyId);
    const all = await operator.get(`/v1/webhooks/${webhook.id}/deliveries`);
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({ object: 'list', has_more: false, url: `/v1/webhooks/${webhook.id}/deliveries` });
    const ids = all.body.data.map((d: { id: string }) => d.id);
    expect(ids).toHaveLength(3);
    expect([...ids].sort().reverse()).toEqual(ids);
    expect(all.body.data[0]).toMatchObject({
      object: 'svc.webhook.delivery',
      webhook_id: webhook.id,
      event_type: 'key.rotated',
      status: 'pending',
      attempts: 0,
      last_attempt_at: null,
      next_attempt_at: Math.floor(t.clock.now() / 1000),
      response_status: null,
    });
    expect(new Set(all.body.data.map((d: { event_id: string }) => d.event_id)).size).toBe(3);

    const page1 = await operator.get(`/v1/webhooks/${webhook.id}/deliveries`, { query: { limit: 2 } });
    expect(page1.body.data.map((d: { id: string }) => d.id)).toEqual(ids.slice(0, 2));
    expect(page1.headers['x-svc-has-more']).toBe('true');
    const page2 = await operator.get(`/v1/webhooks/${webhook.id}/deliveries`, { query: { limit: 2, starting_after: ids[1] } });
    expect(page2.body.data.map((d: { id: string }) => d.id)).toEqual([ids[2]]);
    expect(page2.body.has_more).toBe(false);
  });
});
