import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/db/ids.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectGqlError, expectGqlHiddenFrom, expectGqlScopeRequired, gqlClient, type Gql } from './gql.ts';

// Rate limits, budgets, usage and routing policies: each field calls the service its REST twin calls.

let t: TestApp;
let operator: Client;
let gql: Gql;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(() => t.close());

const ALL = ['governance:manage', 'budgets:manage', 'usage:read', 'inference:write', 'keys:manage'];
const RATE_LIMITS = `query($p: ID!) { rateLimits(projectId: $p) { projectId requestsPerMinute tokensPerMinute burst updatedAt } }`;
const UPDATE_LIMITS = `mutation($p: ID!, $i: RateLimitsInput!) { updateRateLimits(projectId: $p, input: $i) { projectId requestsPerMinute tokensPerMinute burst updatedAt } }`;
const BUDGET = `query($p: ID!) { budget(projectId: $p) { projectId budgetUsd spentUsd period updatedAt } }`;
const POLICY_FIELDS = 'id projectId name strategy targets { provider model weight } cacheTtlS isDefault createdAt updatedAt';

describe('rate limits', () => {
  it('shows the plan defaults, then the limits set, as REST', async () => {
    const { projectId, secret } = await seedProject(operator, { scopes: ALL, plan: 'growth' });
    const before = await gql(RATE_LIMITS, { p: projectId }, { key: secret });
    expect(before.body.data.rateLimits).toEqual({ projectId, requestsPerMinute: 300, tokensPerMinute: 500_000, burst: 0, updatedAt: null });
    const updated = await gql(UPDATE_LIMITS, { p: projectId, i: { requestsPerMinute: 50, tokensPerMinute: 7000, burst: 3 } }, { key: secret });
    const now = Math.floor(t.clock.now() / 1000);
    expect(updated.body.data.updateRateLimits).toEqual({ projectId, requestsPerMinute: 50, tokensPerMinute: 7000, burst: 3, updatedAt: now });
    const rest = await client(t.app, secret).get(`/v1/projects/${projectId}/rate-limits`);
    expect(rest.body).toMatchObject({ requests_per_minute: 50, tokens_per_minute: 7000, burst: 3, updated_at: now });
  });

  it('refuses limits out of range with the param REST names', async () => {
    const { projectId, secret } = await seedProject(operator, { scopes: ALL });
    const res = await gql(UPDATE_LIMITS, { p: projectId, i: { requestsPerMinute: 10, tokensPerMinute: 10, burst: -1 } }, { key: secret });
    expectGqlError(res, 'invalid_request', { param: 'burst', httpStatus: 400 });
  });
});

describe('budgets', () => {
  it('sets, reads and removes the project budget; budgetUsd must be given', async () => {
    const { projectId, secret } = await seedProject(operator, { scopes: ALL });
    const SET = `mutation($p: ID!, $b: Float) { updateBudget(projectId: $p, budgetUsd: $b) { budgetUsd spentUsd period } }`;
    const set = await gql(SET, { p: projectId, b: 42.5 }, { key: secret });
    const period = new Date(t.clock.now()).toISOString().slice(0, 7);
    expect(set.body.data.updateBudget).toEqual({ budgetUsd: 42.5, spentUsd: 0, period });
    expect((await gql(BUDGET, { p: projectId }, { key: secret })).body.data.budget).toMatchObject({ projectId, budgetUsd: 42.5 });

    const removed = await gql(SET, { p: projectId, b: null }, { key: secret });
    expect(removed.body.data.updateBudget.budgetUsd).toBeNull();

    const absent = await gql(`mutation($p: ID!) { updateBudget(projectId: $p) { budgetUsd } }`, { p: projectId }, { key: secret });
    expectGqlError(absent, 'invalid_request', { param: 'budget_usd', httpStatus: 400 });
    const negative = await gql(SET, { p: projectId, b: -1 }, { key: secret });
    expectGqlError(negative, 'invalid_request', { param: 'budget_usd' });
  });
});

describe('usage', () => {
  it('pages usage records by request id and sums them by day', async () => {
    const { projectId, keyId, secret } = await seedProject(operator, { scopes: ALL });
    const now = t.clock.now();
    const ids = [newId('req', now - 2000), newId('req', now - 1000), newId('req', now)];
    await t.deps.db.usageRecord.createMany({
      data: ids.map((requestId, i) => ({
        requestId,
        projectId,
        keyId,
        model: 'mock-1',
        route: 'mock/mock-1',
        region: 'local',
        status: 'succeeded',
        promptTokens: 10 * (i + 1),
        completionTokens: 5,
        costMicros: 1_500_000n,
        latencyMs: 12,
        createdAt: new Date(now),
      })),
    });
    const page = await gql(
      `query($a: String) { usage(first: 2, after: $a) { edges { cursor node { requestId keyId model route cacheHit status promptTokens costUsd createdAt } } pageInfo { hasNextPage } } }`,
      {},
      { key: secret },
    );
    expect(page.body.data.usage.edges.map((e: any) => e.cursor)).toEqual([ids[2], ids[1]]);
    expect(page.body.data.usage.edges[0].node).toMatchObject({ requestId: ids[2], keyId, model: 'mock-1', costUsd: 1.5, promptTokens: 30 });
    expect(page.body.data.usage.pageInfo.hasNextPage).toBe(true);
    const next = await gql(`query($a: String) { usage(first: 2, after: $a) { edges { cursor } } }`, { a: ids[1] }, { key: secret });
    expect(next.body.data.usage.edges.map((e: any) => e.cursor)).toEqual([ids[0]]);

    const days = await gql(`{ usageByDay { date requests promptTokens completionTokens costUsd } }`, {}, { key: secret });
    expect(days.body.data.usageByDay).toHaveLength(1);
    expect(days.body.data.usageByDay[0]).toMatchObject({ requests: 3, promptTokens: 60, completionTokens: 15, costUsd: 4.5 });

    const badDate = await gql(`{ usageByDay(startDate: "2026-13-01") { date } }`, {}, { key: secret });
    expectGqlError(badDate, 'invalid_request', { param: 'start_date', httpStatus: 400 });
  });
});

describe('routing policies', () => {
  it('creates, reads, lists, updates and deletes a policy', async () => {
    const { projectId, secret } = await seedProject(operator, { scopes: ALL });
    const created = await gql(
      `mutation($i: CreateRoutingPolicyInput!) { createRoutingPolicy(input: $i) { ${POLICY_FIELDS} } }`,
      { i: { projectId, name: 'primary', strategy: 'ordered', targets: [{ model: 'mock-1' }], cacheTtlS: 60 } },
      { key: secret },
    );
    const policy = created.body.data.createRoutingPolicy;
    expect(policy).toMatchObject({
      projectId,
      name: 'primary',
      strategy: 'ordered',
      targets: [{ provider: null, model: 'mock-1', weight: 1 }],
      cacheTtlS: 60,
      isDefault: true,
    });
    expect(policy.id).toMatch(/^pol_/);

    const read = await gql(`query($id: ID!) { routingPolicy(id: $id) { id name } }`, { id: policy.id }, { key: secret });
    expect(read.body.data.routingPolicy).toEqual({ id: policy.id, name: 'primary' });
    const list = await gql(`{ routingPolicies { edges { cursor node { id } } } }`, {}, { key: secret });
    expect(list.body.data.routingPolicies.edges).toEqual([{ cursor: policy.id, node: { id: policy.id } }]);

    // Only the fields given change; cacheTtlS null removes the TTL.
    const updated = await gql(
      `mutation($id: ID!, $i: UpdateRoutingPolicyInput!) { updateRoutingPolicy(id: $id, input: $i) { name strategy cacheTtlS targets { model } } }`,
      { id: policy.id, i: { strategy: 'cheapest', cacheTtlS: null } },
      { key: secret },
    );
    expect(updated.body.data.updateRoutingPolicy).toEqual({ name: 'primary', strategy: 'cheapest', cacheTtlS: null, targets: [{ model: 'mock-1' }] });

    const deleted = await gql(`mutation($id: ID!) { deleteRoutingPolicy(id: $id) { id deleted } }`, { id: policy.id }, { key: secret });
    expect(deleted.body.data.deleteRoutingPolicy).toEqual({ id: policy.id, deleted: true });
    expectGqlError(await gql(`query($id: ID!) { routingPolicy(id: $id) { id } }`, { id: policy.id }, { key: secret }), 'not_found', {
      param: 'policy_id',
      httpStatus: 404,
    });
    const actions = (await operator.get('/v1/audit/events', { query: { project_id: projectId } })).body.data.map((a: any) => a.action);
    expect(actions.slice(0, 3)).toEqual(['routing_policy.delete', 'routing_policy.update', 'routing_policy.create']);
  });

  it('names the offending target as REST does', async () => {
    const { projectId, secret } = await seedProject(operator, { scopes: ALL });
    const res = await gql(
      `mutation($i: CreateRoutingPolicyInput!) { createRoutingPolicy(input: $i) { id } }`,
      { i: { projectId, name: 'bad', strategy: 'ordered', targets: [{ model: 'mock-1' }, { model: 'gpt-nope' }] } },
      { key: secret },
    );
    expectGqlError(res, 'invalid_request', { param: 'targets[1].model', httpStatus: 400 });
  });
});

describe('security', () => {
  it('requires each capability scope', async () => {
    const { projectId } = await seedProject(operator, { scopes: ALL });
    const weak = (await operator.post('/v1/keys', { project_id: projectId, name: 'weak', scopes: ['models:read'] })).body.secret;
    await expectGqlScopeRequired(gql, weak, [
      { field: 'rateLimits', query: RATE_LIMITS, variables: { p: projectId } },
      { field: 'updateRateLimits', query: UPDATE_LIMITS, variables: { p: projectId, i: { requestsPerMinute: 1, tokensPerMinute: 1, burst: 0 } } },
      { field: 'budget', query: BUDGET, variables: { p: projectId } },
      { field: 'updateBudget', query: `mutation { updateBudget(projectId: "${projectId}", budgetUsd: 1) { budgetUsd } }` },
      { field: 'usage', query: '{ usage { edges { cursor } } }' },
      { field: 'usageByDay', query: '{ usageByDay { date } }' },
      { field: 'routingPolicies', query: '{ routingPolicies { edges { cursor } } }' },
      { field: 'createRoutingPolicy', query: `mutation { createRoutingPolicy(input: { projectId: "${projectId}", name: "x", strategy: "ordered", targets: [{ model: "mock-1" }] }) { id } }` },
    ]);
  });

  it("answers not_found for another project's limits, budget, usage and policies", async () => {
    const mine = await seedProject(operator, { scopes: ALL });
    const theirs = await seedProject(operator, { scopes: ALL });
    const policy = (
      await gql(
        `mutation($i: CreateRoutingPolicyInput!) { createRoutingPolicy(input: $i) { id } }`,
        { i: { projectId: theirs.projectId, name: 'theirs', strategy: 'ordered', targets: [{ model: 'mock-1' }] } },
        { key: theirs.secret },
      )
    ).body.data.createRoutingPolicy;
    await expectGqlHiddenFrom(gql, mine.secret, [
      { field: 'rateLimits', query: RATE_LIMITS, variables: { p: theirs.projectId } },
      { field: 'updateRateLimits', query: UPDATE_LIMITS, variables: { p: theirs.projectId, i: { requestsPerMinute: 1, tokensPerMinute: 1, burst: 0 } } },
      { field: 'budget', query: BUDGET, variables: { p: theirs.projectId } },
      { field: 'updateBudget', query: `mutation { updateBudget(projectId: "${theirs.projectId}", budgetUsd: 1) { budgetUsd } }` },
      { field: 'usage', query: `{ usage(projectId: "${theirs.projectId}") { edges { cursor } } }` },
      { field: 'routingPolicy', query: `{ routingPolicy(id: "${policy.id}") { id } }` },
      { field: 'updateRoutingPolicy', query: `mutation { updateRoutingPolicy(id: "${policy.id}", input: { name: "mine" }) { id } }` },
      { field: 'deleteRoutingPolicy', query: `mutation { deleteRoutingPolicy(id: "${policy.id}") { id } }` },
    ]);
    const theirLimits = await gql(RATE_LIMITS, { p: theirs.projectId }, { key: theirs.secret });
    expect(theirLimits.body.data.rateLimits.updatedAt).toBeNull();
  });
});
