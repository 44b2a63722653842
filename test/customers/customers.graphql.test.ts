import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchRunner } from '../../src/jobs/batch-runner/runner.ts';
import { client, seedProject } from '../helpers/app.ts';
import { REDIS_URL } from '../helpers/services.ts';
import { expectGqlError, expectGqlHiddenFrom, expectGqlScopeRequired, gqlClient, type Gql } from '../graphql/gql.ts';
import { multipart } from '../rag/support.ts';
import { chat, PRICED, startGateway, type Gateway } from './support.ts';

let g: Gateway;
let gql: Gql;
beforeAll(async () => {
  g = await startGateway();
  gql = gqlClient(g.t.app);
}, 120_000);
afterAll(() => g.close());

const SCOPES = ['inference:write', 'budgets:manage', 'governance:manage', 'usage:read'];
const FIELDS = 'id projectId budgetUsd hardStop spentUsd period requestsPerMinute tokensPerMinute createdAt updatedAt';
const SET_BUDGET = `mutation($p: ID!, $c: String!, $b: Float, $h: Boolean) { updateCustomerBudget(projectId: $p, customer: $c, budgetUsd: $b, hardStop: $h) { ${FIELDS} } }`;
const SET_LIMITS = `mutation($p: ID!, $c: String!, $r: Int, $t: Int) { updateCustomerRateLimits(projectId: $p, customer: $c, requestsPerMinute: $r, tokensPerMinute: $t) { ${FIELDS} } }`;
const GET = `query($p: ID!, $c: String!) { customer(projectId: $p, customer: $c) { ${FIELDS} } }`;
const LIST = `query($p: ID!, $first: Int, $after: String) { customers(projectId: $p, first: $first, after: $after) { edges { cursor node { id spentUsd } } pageInfo { hasNextPage } } }`;
const USAGE = `query($c: String) { usage(customer: $c) { edges { node { requestId customer } } } }`;

describe('the GraphQL twins (CONTRACT §22)', () => {
  it('set, read and list customers with the same answers as REST; usage(customer:) filters', async () => {
    const s = await seedProject(g.operator, { scopes: SCOPES });
    const api = client(g.t.app, s.secret);
    const set = await gql(SET_BUDGET, { p: s.projectId, c: 'gq_1', b: 1, h: true }, { key: s.secret });
    expect(set.body.errors).toBeUndefined();
    expect(set.body.data.updateCustomerBudget).toMatchObject({ id: 'gq_1', projectId: s.projectId, budgetUsd: 1, hardStop: true, spentUsd: 0, requestsPerMinute: null });
    const limits = await gql(SET_LIMITS, { p: s.projectId, c: 'gq_1', r: 5, t: null }, { key: s.secret });
    expect(limits.body.data.updateCustomerRateLimits).toMatchObject({ requestsPerMinute: 5, tokensPerMinute: null, budgetUsd: 1 });
    expect((await chat(api, 'gq_1')).status).toBe(200);
    const refused = await chat(api, 'gq_1');
    expect([refused.status, refused.body.error.param]).toEqual([429, 'customer']);

    const got = await gql(GET, { p: s.projectId, c: 'gq_1' }, { key: s.secret });
    const rest = await api.get(`/v1/projects/${s.projectId}/customers/gq_1`);
    const c = got.body.data.customer;
    expect([c.id, c.budgetUsd, c.hardStop, c.spentUsd, c.period, c.requestsPerMinute, c.tokensPerMinute, c.createdAt, c.updatedAt]).toEqual([
      rest.body.id,
      rest.body.budget_usd,
      rest.body.hard_stop,
      rest.body.spent_usd,
      rest.body.period,
      rest.body.rate_limits.requests_per_minute,
      rest.body.rate_limits.tokens_per_minute,
      rest.body.created_at,
      rest.body.updated_at,
    ]);
    await chat(api, 'gq_2');
    const list = await gql(LIST, { p: s.projectId, first: 1 }, { key: s.secret });
    expect(list.body.data.customers.edges.map((e: { node: { id: string } }) => e.node.id)).toEqual(['gq_2']);
    expect(list.body.data.customers.pageInfo.hasNextPage).toBe(true);
    const next = await gql(LIST, { p: s.projectId, first: 5, after: list.body.data.customers.edges[0].cursor }, { key: s.secret });
    expect(next.body.data.customers.edges.map((e: { node: { id: string } }) => e.node.id)).toEqual(['gq_1']);

    const usage = await gql(USAGE, { c: 'gq_2' }, { key: s.secret });
    expect(usage.body.data.usage.edges.map((e: { node: { customer: string } }) => e.node.customer)).toEqual(['gq_2']);
  });

  it('the same errors: invalid input names the field, an unknown customer is not_found, scopes and tenancy hold', async () => {
    const s = await seedProject(g.operator, { scopes: SCOPES });
    expectGqlError(await gql(SET_BUDGET, { p: s.projectId, c: 'gq_x', b: -1 }, { key: s.secret }), 'invalid_request', { param: 'budget_usd', httpStatus: 400 });
    expectGqlError(await gql(SET_BUDGET, { p: s.projectId, c: 'gq_x' }, { key: s.secret }), 'invalid_request', { param: 'budget_usd' });
    expectGqlError(await gql(SET_LIMITS, { p: s.projectId, c: 'gq_x', r: 0, t: null }, { key: s.secret }), 'invalid_request', { param: 'requests_per_minute' });
    expectGqlError(await gql(SET_BUDGET, { p: s.projectId, c: ' bad', b: 1 }, { key: s.secret }), 'invalid_request', { param: 'customer' });
    expectGqlError(await gql(GET, { p: s.projectId, c: 'x'.repeat(257) }, { key: s.secret }), 'invalid_request', { param: 'customer' });
    // 256 characters: a customer GraphQL addresses (a REST path segment stops at 100 characters).
    const longest = 'y'.repeat(256);
    expect((await gql(SET_BUDGET, { p: s.projectId, c: longest, b: 1 }, { key: s.secret })).body.data.updateCustomerBudget.id).toBe(longest);
    expectGqlError(await gql(GET, { p: s.projectId, c: 'gq_nobody' }, { key: s.secret }), 'not_found', { param: 'customer', httpStatus: 404 });

    const weak = await seedProject(g.operator, { scopes: ['inference:write'] });
    await expectGqlScopeRequired(gql, weak.secret, [
      { field: 'updateCustomerBudget', query: SET_BUDGET, variables: { p: weak.projectId, c: 'a', b: 1 } },
      { field: 'updateCustomerRateLimits', query: SET_LIMITS, variables: { p: weak.projectId, c: 'a', r: 1, t: 1 } },
      { field: 'customer', query: GET, variables: { p: weak.projectId, c: 'a' } },
      { field: 'customers', query: LIST, variables: { p: weak.projectId } },
    ]);
    await gql(SET_BUDGET, { p: s.projectId, c: 'gq_theirs', b: 1 }, { key: s.secret });
    const other = await seedProject(g.operator, { scopes: SCOPES });
    await expectGqlHiddenFrom(gql, other.secret, [
      { field: 'updateCustomerBudget', query: SET_BUDGET, variables: { p: s.projectId, c: 'gq_theirs', b: 1 } },
      { field: 'customer', query: GET, variables: { p: s.projectId, c: 'gq_theirs' } },
      { field: 'customers', query: LIST, variables: { p: s.projectId } },
    ]);
  });
});

describe('batches: a line\'s user is its customer', () => {
  it('a customer\'s budget fails that customer\'s lines only (budget_exceeded, param customer); the others run', async () => {
    const s = await seedProject(g.operator, { scopes: SCOPES });
    const api = client(g.t.app, s.secret);
    await api.put(`/v1/projects/${s.projectId}/customers/bt_stopped/budget`, { budget_usd: 0 });
    const line = (id: string, user: string) => JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/chat/completions', body: { model: PRICED, user, messages: [{ role: 'user', content: `hi ${id}` }] } });
    const { payload, contentType } = multipart({ name: 'in.jsonl', type: 'application/jsonl', data: [line('a', 'bt_ok'), line('b', 'bt_stopped'), line('c', 'bt_ok')].join('\n') }, { purpose: 'batch' });
    const file = await g.t.app.inject({ method: 'POST', url: '/v1/files', headers: { authorization: `Bearer ${s.secret}`, 'content-type': contentType }, payload });
    expect(file.statusCode, file.body).toBe(200);
    const batch = await api.post('/v1/batches', { input_file_id: JSON.parse(file.body).id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    await new BatchRunner(g.t.deps, { sleep: async (ms) => g.t.clock.advance(ms) }).runPending();
    const done = await api.get(`/v1/batches/${batch.body.id}`);
    expect([done.body.status, done.body.request_counts]).toEqual(['completed', { total: 3, completed: 2, failed: 1 }]);
    const errors = (await api.get(`/v1/files/${done.body.error_file_id}/content`)).raw.trim().split('\n').map((l: string) => JSON.parse(l));
    expect(errors.map((e: { custom_id: string; response: { body: { error: { code: string; param: string } } } }) => [e.custom_id, e.response.body.error.code, e.response.body.error.param])).toEqual([
      ['b', 'budget_exceeded', 'customer'],
    ]);
    await g.t.deps.outcomes.flush();
    const records = await g.t.deps.db.usageRecord.findMany({ where: { projectId: s.projectId }, select: { customer: true, status: true }, orderBy: { requestId: 'asc' } });
    expect(records.map((r) => `${r.customer}:${r.status}`).sort()).toEqual(['bt_ok:succeeded', 'bt_ok:succeeded', 'bt_stopped:failed']);
  });
});

describe.skipIf(!REDIS_URL)('the hot path: a customer adds no round trip', () => {
  it('its windows and its budget counter travel in the one script call before the provider call', async () => {
    const s = await seedProject(g.operator, { scopes: SCOPES, budgetUsd: 1_000_000 });
    const api = client(g.t.app, s.secret);
    await api.put(`/v1/projects/${s.projectId}/customers/hp_1/budget`, { budget_usd: 1_000 });
    await api.put(`/v1/projects/${s.projectId}/customers/hp_1/rate-limits`, { requests_per_minute: 100, tokens_per_minute: 100_000 });
    // Warm: the customer cache and the spend counters are loaded (first use of a month seeds from PostgreSQL).
    for (let i = 0; i < 2; i++) expect((await chat(api, 'hp_1')).status).toBe(200);

    // Every script call of the shared batch (redis/batch.ts), with its KEYS, and whether the provider was called yet.
    const redis = g.t.deps.redis! as unknown as { svcBatch: (numKeys: number, ...args: (string | number)[]) => Promise<unknown> };
    const svcBatch = redis.svcBatch.bind(redis);
    const calls: { beforeProvider: boolean; keys: string[] }[] = [];
    let providerCalled = false;
    redis.svcBatch = (numKeys, ...args) => {
      calls.push({ beforeProvider: !providerCalled, keys: args.slice(0, numKeys).map(String) });
      return svcBatch(numKeys, ...args);
    };
    const providers = g.t.deps.providers as unknown as { complete: (...a: unknown[]) => Promise<unknown> };
    const complete = providers.complete.bind(providers);
    providers.complete = (...a) => {
      providerCalled = true;
      return complete(...a);
    };
    try {
      expect((await chat(api, 'hp_1')).status).toBe(200);
    } finally {
      redis.svcBatch = svcBatch;
      providers.complete = complete;
    }
    // Of this project's script calls before the provider call, ONE: the limiter's windows (the customer's two among
    // the key's and the project's) and the budget counters (the customer's beside the project's) together.
    const mine = calls.filter((c) => c.beforeProvider && c.keys.some((k) => k.includes(`{${s.projectId}}`)));
    expect(mine).toHaveLength(1);
    const keys = mine[0]!.keys;
    expect(keys.filter((k) => k.includes(':c:hp_1:')).map((k) => k.slice(k.lastIndexOf(':') + 1)).sort()).toEqual(['r', 't']);
    expect(keys.filter((k) => k.includes('spend:')).map((k) => k.split(':').slice(-3, -1).join(':')).sort()).toEqual([
      `${s.projectId}:hp_1`,
      `project:${s.projectId}`,
    ]);
  });
});
