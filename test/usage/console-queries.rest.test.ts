import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/db/ids.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { expectHiddenFrom, expectScopeRequired } from '../helpers/security.ts';
import { gqlClient } from '../graphql/gql.ts';

/** GET /v1/usage/requests, /v1/usage/requests/{id} and /v1/usage/spend: the REST twins of the console's queries. */
let t: TestApp;
let operator: Client;
let a: { projectId: string; keyId: string; secret: string };
let b: { projectId: string; keyId: string; secret: string };
let api: Client;
const DAY = 86_400_000;
const ids: string[] = [];

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
  a = await seedProject(operator, { scopes: ['usage:read', 'inference:write'] });
  b = await seedProject(operator, { scopes: ['usage:read'] });
  api = client(t.app, a.secret);
  const now = t.clock.now();
  const rows = [0, 1, 2, 3].map((i) => {
    const at = new Date(now - (3 - i) * DAY);
    const id = newId('req', at.getTime());
    ids.push(id);
    return {
      requestId: id, projectId: a.projectId, keyId: a.keyId, model: i % 2 ? 'm2' : 'm1', route: 'p/m', region: 'eu',
      status: i === 3 ? 'failed' : 'succeeded', errorCode: i === 3 ? 'provider_error' : null, cacheHit: i === 0,
      costMicros: BigInt(1000 * (i + 1)), promptTokens: 10, completionTokens: 5, latencyMs: 50, customer: i < 2 ? 'acme' : null, createdAt: at,
    };
  });
  await t.deps.db.usageRecord.createMany({ data: rows });
}, 120_000);
afterAll(async () => {
  await t?.close();
});

describe('GET /v1/usage/requests', () => {
  it('lists usage records newest first, filtered, in the list envelope', async () => {
    const all = await api.get('/v1/usage/requests');
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({ object: 'list', has_more: false, url: '/v1/usage/requests' });
    expect(all.body.data.map((r: { request_id: string }) => r.request_id)).toEqual([...ids].reverse());
    expect(all.body.data[0]).toMatchObject({ object: 'svc.usage_record', status: 'failed', error_code: 'provider_error', cost_usd: 0.004 });
    const m2 = await api.get('/v1/usage/requests', { query: { model: 'm2', limit: 1 } });
    expect(m2.body.data.map((r: { request_id: string }) => r.request_id)).toEqual([ids[3]]);
    expect(m2.headers['x-svc-has-more']).toBe('true');
    const next = await api.get('/v1/usage/requests', { query: { model: 'm2', limit: 1, starting_after: ids[3] } });
    expect(next.body.data.map((r: { request_id: string }) => r.request_id)).toEqual([ids[1]]);
    const hits = await api.get('/v1/usage/requests', { query: { cache_hit: 'true' } });
    expect(hits.body.data.map((r: { request_id: string }) => r.request_id)).toEqual([ids[0]]);
    const acme = await api.get('/v1/usage/requests', { query: { customer: 'acme', status: 'succeeded' } });
    expect(acme.body.data.map((r: { customer: string }) => r.customer)).toEqual(['acme', 'acme']);
  });

  it('refuses bad filters naming them', async () => {
    expectError(await api.get('/v1/usage/requests', { query: { status: 'nope' } }), 400, 'invalid_request', 'status');
    expectError(await api.get('/v1/usage/requests', { query: { created_gte: 20, created_lt: 10 } }), 400, 'invalid_request', 'created_lt');
    expectError(await api.get('/v1/usage/requests', { query: { limit: 0 } }), 400, 'invalid_request', 'limit');
    expectError(await api.get('/v1/usage/requests', { query: { starting_after: 'req_nope' } }), 400, 'invalid_request', 'starting_after');
    expectError(await api.get('/v1/usage/requests', { query: { colour: 'red' } }), 400, 'invalid_request', 'colour');
  });
});

describe('GET /v1/usage/requests/{request_id}', () => {
  it('answers the record and its timeline, as GraphQL does', async () => {
    const res = await api.get(`/v1/usage/requests/${ids[3]}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ object: 'svc.request_detail', inference_id: null, content_retained: false, record: { request_id: ids[3], status: 'failed' } });
    expect(res.body.timeline.map((s: { step: string; status: string }) => `${s.step}:${s.status}`)).toEqual([
      'received:ok', 'authenticated:ok', 'limits:ok', 'cache:skipped', 'provider:failed', 'outcome:failed',
    ]);
    const gql = await gqlClient(t.app)(`query D($id: ID!) { requestDetail(requestId: $id) { timeline { step atMs status detail } } }`, { id: ids[3] }, { key: a.secret });
    expect(gql.body.data.requestDetail.timeline).toEqual(res.body.timeline.map((s: { step: string; at_ms: number; status: string; detail: string }) => ({ step: s.step, atMs: s.at_ms, status: s.status, detail: s.detail })));
  });

  it("is not_found for an unknown request and another project's", async () => {
    expectError(await api.get('/v1/usage/requests/req_unknown'), 404, 'not_found', 'request_id');
    await expectHiddenFrom(client(t.app, b.secret), [{ method: 'get', url: `/v1/usage/requests/${ids[0]}` }]);
  });
});

describe('GET /v1/usage/spend', () => {
  it('sums per day and value, the same figures as GraphQL', async () => {
    const res = await api.get('/v1/usage/spend', { query: { by: 'model' } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ object: 'svc.spend_report', by: 'model', other_values: 0 });
    expect(res.body.values).toEqual([
      { value: 'm2', requests: 2, prompt_tokens: 20, completion_tokens: 10, cost_usd: 0.006 },
      { value: 'm1', requests: 2, prompt_tokens: 20, completion_tokens: 10, cost_usd: 0.004 },
    ]);
    expect(res.body.totals).toEqual({ requests: 4, prompt_tokens: 40, completion_tokens: 20, cost_usd: 0.01 });
    expect(res.body.cells).toHaveLength(4);
    const gql = await gqlClient(t.app)(`{ spend(by: "model") { values { value costUsd } } }`, {}, { key: a.secret });
    expect(gql.body.data.spend.values).toEqual([{ value: 'm2', costUsd: 0.006 }, { value: 'm1', costUsd: 0.004 }]);
    const top = await api.get('/v1/usage/spend', { query: { by: 'customer', top: 1 } });
    expect(top.body.values.map((v: { value: string | null }) => v.value)).toEqual(['', null]);
    expect(top.body.other_values).toBe(1);
  });

  it('refuses a bad dimension, range or top naming it', async () => {
    expectError(await api.get('/v1/usage/spend', { query: { by: 'colour' } }), 400, 'invalid_request', 'by');
    expectError(await api.get('/v1/usage/spend', { query: { start_date: '2026-01-31', end_date: '2026-01-01' } }), 400, 'invalid_request', 'end_date');
    expectError(await api.get('/v1/usage/spend', { query: { start_date: 'yesterday' } }), 400, 'invalid_request', 'start_date');
    expectError(await api.get('/v1/usage/spend', { query: { top: 0 } }), 400, 'invalid_request', 'top');
  });

  it("needs usage:read, and hides another project's", async () => {
    const weak = await operator.post('/v1/keys', { project_id: a.projectId, name: 'weak', scopes: ['inference:write'] });
    await expectScopeRequired(client(t.app, weak.body.secret), [
      { method: 'get', url: '/v1/usage/requests' },
      { method: 'get', url: `/v1/usage/requests/${ids[0]}` },
      { method: 'get', url: '/v1/usage/spend' },
    ]);
    await expectHiddenFrom(client(t.app, b.secret), [
      { method: 'get', url: `/v1/usage/spend?project_id=${a.projectId}` },
      { method: 'get', url: `/v1/usage/requests?project_id=${a.projectId}` },
    ]);
  });
});
