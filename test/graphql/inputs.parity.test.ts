import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { expectGqlError, gqlClient, type Gql, type GqlResponse } from './gql.ts';

// One schema per input (domain/<capability>/schema.ts) is REST's route schema and the service's check, which GraphQL
// reaches with the same snake_case object: the same bad value gets the same code, param, message and status on both
// surfaces, nested paths included. The values are ones GraphQL's own types let through (ranges, enums, lengths,
// patterns, lists), so that it is the schema that refuses them on both sides.

let t: TestApp;
let gql: Gql;
let api: Client;
let projectId: string;
let keyId: string;
let secret: string;

beforeAll(async () => {
  t = await buildTestApp();
  gql = gqlClient(t.app);
  const seeded = await seedProject(client(t.app), {
    scopes: ['keys:manage', 'governance:manage', 'budgets:manage', 'audit:read', 'usage:read', 'inference:write'],
  });
  ({ projectId, keyId, secret } = seeded);
  api = client(t.app, secret);
});
afterAll(() => t.close());

/** The REST call and its GraphQL twin, and the param both must name. */
type Case = [name: string, rest: () => Promise<{ status: number; headers: Record<string, unknown>; body: any }>, graphql: () => Promise<GqlResponse>, param: string];

const q = (query: string, variables: Record<string, unknown> = {}) => () => gql(query, variables, { key: secret });
const CREATE_KEY = 'mutation($i: CreateKeyInput!) { createKey(input: $i) { secret } }';
const CREATE_POLICY = 'mutation($i: CreateRoutingPolicyInput!) { createRoutingPolicy(input: $i) { id } }';
const target = (extra: Record<string, unknown> = {}) => ({ model: 'mock-1', ...extra });

const cases = (): Case[] => [
  [
    'createKey: an unknown scope in the list',
    () => api.post('/v1/keys', { project_id: projectId, name: 'k', scopes: ['keys:manage', 'nope'] }),
    q(CREATE_KEY, { i: { projectId, name: 'k', scopes: ['keys:manage', 'nope'] } }),
    'scopes',
  ],
  ['createKey: no scope', () => api.post('/v1/keys', { project_id: projectId, name: 'k', scopes: [] }), q(CREATE_KEY, { i: { projectId, name: 'k', scopes: [] } }), 'scopes'],
  [
    'createKey: a negative budget',
    () => api.post('/v1/keys', { project_id: projectId, name: 'k', scopes: ['keys:manage'], budget_usd: -1 }),
    q(CREATE_KEY, { i: { projectId, name: 'k', scopes: ['keys:manage'], budgetUsd: -1 } }),
    'budget_usd',
  ],
  [
    'createKey: an expiry after the year 9999',
    () => api.post('/v1/keys', { project_id: projectId, name: 'k', scopes: ['keys:manage'], expires_at: 253_402_300_800 }),
    q(CREATE_KEY, { i: { projectId, name: 'k', scopes: ['keys:manage'], expiresAt: 253_402_300_800 } }),
    'expires_at',
  ],
  [
    'rotateKey: overlap_hours over 168',
    () => api.post(`/v1/keys/${keyId}/rotate`, { overlap_hours: 169 }),
    q('mutation($id: ID!) { rotateKey(id: $id, overlapHours: 169) { secret } }', { id: keyId }),
    'overlap_hours',
  ],
  [
    'createProject: an unknown plan',
    () => client(t.app).post('/v1/projects', { name: 'p', plan: 'platinum' }),
    () => gql('mutation { createProject(input: { name: "p", plan: "platinum" }) { id } }'),
    'plan',
  ],
  [
    'createProject: a region not in lower case',
    () => client(t.app).post('/v1/projects', { name: 'p', region: 'EU-West-1' }),
    () => gql('mutation { createProject(input: { name: "p", region: "EU-West-1" }) { id } }'),
    'region',
  ],
  [
    'createProject: a blank name',
    () => client(t.app).post('/v1/projects', { name: '   ' }),
    () => gql('mutation { createProject(input: { name: "   " }) { id } }'),
    'name',
  ],
  [
    'updateRateLimits: a negative burst',
    () => api.put(`/v1/projects/${projectId}/rate-limits`, { requests_per_minute: 1, tokens_per_minute: 1, burst: -1 }),
    q('mutation($p: ID!) { updateRateLimits(projectId: $p, input: { requestsPerMinute: 1, tokensPerMinute: 1, burst: -1 }) { burst } }', { p: projectId }),
    'burst',
  ],
  [
    'updateBudget: a negative budget',
    () => api.put(`/v1/projects/${projectId}/budget`, { budget_usd: -5 }),
    q('mutation($p: ID!) { updateBudget(projectId: $p, budgetUsd: -5) { budgetUsd } }', { p: projectId }),
    'budget_usd',
  ],
  [
    'updateBudget: budget_usd not given',
    () => api.put(`/v1/projects/${projectId}/budget`, {}),
    q('mutation($p: ID!) { updateBudget(projectId: $p) { budgetUsd } }', { p: projectId }),
    'budget_usd',
  ],
  [
    'createWebhook: an unknown event type',
    () => api.post('/v1/webhooks', { project_id: projectId, url: 'https://hooks.example.com/x', events: ['key.rotated', 'key.exploded'] }),
    q('mutation($i: CreateWebhookInput!) { createWebhook(input: $i) { secret } }', {
      i: { projectId, url: 'https://hooks.example.com/x', events: ['key.rotated', 'key.exploded'] },
    }),
    'events',
  ],
  [
    'createWebhook: a url over 2048 characters',
    () => api.post('/v1/webhooks', { project_id: projectId, url: `https://hooks.example.com/${'a'.repeat(2048)}`, events: ['key.rotated'] }),
    q('mutation($i: CreateWebhookInput!) { createWebhook(input: $i) { secret } }', {
      i: { projectId, url: `https://hooks.example.com/${'a'.repeat(2048)}`, events: ['key.rotated'] },
    }),
    'url',
  ],
  [
    'createRoutingPolicy: an unknown strategy',
    () => api.post('/v1/routing/policies', { project_id: projectId, name: 'p', strategy: 'random', targets: [target()] }),
    q(CREATE_POLICY, { i: { projectId, name: 'p', strategy: 'random', targets: [target()] } }),
    'strategy',
  ],
  [
    'createRoutingPolicy: the second target\'s weight out of range',
    () => api.post('/v1/routing/policies', { project_id: projectId, name: 'p', strategy: 'weighted', targets: [target(), target({ weight: 0 })] }),
    q(CREATE_POLICY, { i: { projectId, name: 'p', strategy: 'weighted', targets: [target(), target({ weight: 0 })] } }),
    'targets[1].weight',
  ],
  [
    'createRoutingPolicy: the second target\'s model not configured',
    () => api.post('/v1/routing/policies', { project_id: projectId, name: 'p', strategy: 'ordered', targets: [target(), { model: 'no-such-model' }] }),
    q(CREATE_POLICY, { i: { projectId, name: 'p', strategy: 'ordered', targets: [target(), { model: 'no-such-model' }] } }),
    'targets[1].model',
  ],
  [
    'createRoutingPolicy: 21 targets',
    () => api.post('/v1/routing/policies', { project_id: projectId, name: 'p', strategy: 'ordered', targets: Array.from({ length: 21 }, () => target()) }),
    q(CREATE_POLICY, { i: { projectId, name: 'p', strategy: 'ordered', targets: Array.from({ length: 21 }, () => target()) } }),
    'targets',
  ],
  [
    'createRoutingPolicy: a cache TTL over a day',
    () => api.post('/v1/routing/policies', { project_id: projectId, name: 'p', strategy: 'ordered', targets: [target()], cache_ttl_s: 86_401 }),
    q(CREATE_POLICY, { i: { projectId, name: 'p', strategy: 'ordered', targets: [target()], cacheTtlS: 86_401 } }),
    'cache_ttl_s',
  ],
  [
    'updateRoutingPolicy: an empty target list',
    () => api.post('/v1/routing/policies/pol_missing', { targets: [] }),
    q('mutation { updateRoutingPolicy(id: "pol_missing", input: { targets: [] }) { id } }'),
    'targets',
  ],
  [
    'keys: a cursor over 200 characters',
    () => api.get(`/v1/keys?starting_after=${'k'.repeat(201)}`),
    q(`{ keys(first: 5, after: "${'k'.repeat(201)}") { edges { cursor } } }`),
    'starting_after',
  ],
  [
    'usage: a start_date that is not a date',
    () => api.get('/v1/usage?granularity=day&start_date=2026-13-01'),
    q('{ usageByDay(startDate: "2026-13-01") { date } }'),
    'start_date',
  ],
  [
    'usage: a malformed end_date',
    () => api.get('/v1/usage?end_date=yesterday'),
    q('{ usage(first: 5, endDate: "yesterday") { edges { cursor } } }'),
    'end_date',
  ],
  ['auditEvents: an empty action', () => api.get('/v1/audit/events?action='), q('{ auditEvents(action: "") { edges { cursor } } }'), 'action'],
];

/** GraphQL names the page parameters by its own arguments (after for starting_after), in the param and the message. */
const graphqlName = (param: string) => (param === 'starting_after' ? 'after' : param === 'ending_before' ? 'before' : param);

describe('REST and GraphQL refuse each bad input alike', () => {
  // Named at collection; built in the test, once the project and key exist.
  it.each(cases().map((c) => c[0]))('%s', async (name) => {
    const [, rest, graphql, param] = cases().find((c) => c[0] === name)!;
    const r = await rest();
    expectError(r, 400, 'invalid_request', param);
    const g = await graphql();
    const expected = graphqlName(param);
    const err = expectGqlError(g, 'invalid_request', { param: expected, httpStatus: 400 });
    expect(err.message).toBe(r.body.error.message.replace(param, expected));
  });

  it('stores nothing for a refused input (no key, no audit row)', async () => {
    const before = await t.deps.db.auditEvent.count({ where: { projectId } });
    for (const [, rest, graphql] of cases().slice(0, 4)) {
      await rest();
      await graphql();
    }
    expect(await t.deps.db.apiKey.count({ where: { projectId } })).toBe(1);
    expect(await t.deps.db.auditEvent.count({ where: { projectId } })).toBe(before);
  });
});
