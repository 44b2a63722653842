import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectGqlError, gqlClient, type Gql } from './gql.ts';

// A variable GraphQL itself refuses (before any resolver runs) names the input field, by REST's name, as the
// service's own refusals do (CONTRACT §4: wrong types are invalid_request with param).

let t: TestApp;
let operator: Client;
let gql: Gql;
let projectId: string;
let secret: string;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
  gql = gqlClient(t.app);
  ({ projectId, secret } = await seedProject(operator, { scopes: ['governance:manage', 'keys:manage'] }));
});
afterAll(() => t.close());

const UPDATE_LIMITS = `mutation($p: ID!, $i: RateLimitsInput!) { updateRateLimits(projectId: $p, input: $i) { burst } }`;

describe('GraphQL variables refused by their type', () => {
  it('names the rate limit over 32 bits as the API names it, like a value under the minimum', async () => {
    const over = await gql(UPDATE_LIMITS, { p: projectId, i: { requestsPerMinute: 2147483648, tokensPerMinute: 10, burst: 0 } }, { key: secret });
    expectGqlError(over, 'invalid_request', { param: 'requests_per_minute', httpStatus: 400 });
    expect(over.status).toBe(400);
    const tokens = await gql(UPDATE_LIMITS, { p: projectId, i: { requestsPerMinute: 1, tokensPerMinute: 1.5, burst: 0 } }, { key: secret });
    expectGqlError(tokens, 'invalid_request', { param: 'tokens_per_minute', httpStatus: 400 });
    const under = await gql(UPDATE_LIMITS, { p: projectId, i: { requestsPerMinute: -5, tokensPerMinute: 10, burst: 0 } }, { key: secret });
    expectGqlError(under, 'invalid_request', { param: 'requests_per_minute', httpStatus: 400 });
    expect(under.body.errors[0].message).toBe('requests_per_minute must be an integer from 1 to 2147483647.');
    // REST says the same about the same value.
    const rest = await client(t.app, secret).put(`/v1/projects/${projectId}/rate-limits`, { requests_per_minute: 2147483648, tokens_per_minute: 10, burst: 0 });
    expect(rest.body.error).toMatchObject({ code: 'invalid_request', param: 'requests_per_minute' });
  });

  it('names a missing or unknown input field', async () => {
    const missing = await gql(UPDATE_LIMITS, { p: projectId, i: { requestsPerMinute: 1, tokensPerMinute: 10 } }, { key: secret });
    expectGqlError(missing, 'invalid_request', { param: 'burst', httpStatus: 400 });
    const unknown = await gql(UPDATE_LIMITS, { p: projectId, i: { requestsPerMinute: 1, tokensPerMinute: 10, burst: 0, burstPerHour: 2 } }, { key: secret });
    expectGqlError(unknown, 'invalid_request', { param: 'burst_per_hour', httpStatus: 400 });
  });

  it('names the field inside a list, with its index', async () => {
    const res = await gql(
      `mutation($i: CreateRoutingPolicyInput!) { createRoutingPolicy(input: $i) { id } }`,
      { i: { projectId, name: 'typed', strategy: 'ordered', targets: [{ model: 'mock-1' }, { model: 5 }] } },
      { key: secret },
    );
    expectGqlError(res, 'invalid_request', { param: 'targets[1].model', httpStatus: 400 });
  });

  it('keeps param null for a top-level variable, whose name is the client\'s own', async () => {
    const res = await gql(`mutation($id: ID!, $hours: Int) { rotateKey(id: $id, overlapHours: $hours) { secret } }`, { id: 'key_x', hours: 'soon' }, { key: secret });
    expectGqlError(res, 'invalid_request', { param: null, httpStatus: 400 });
  });
});
