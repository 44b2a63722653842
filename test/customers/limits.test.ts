import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, seedProject } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { REDIS_URL } from '../helpers/services.ts';
import { chat, PRICED, startGateway, type Gateway } from './support.ts';

let g: Gateway;
beforeAll(async () => {
  g = await startGateway();
}, 120_000);
afterAll(() => g.close());

const SCOPES = ['inference:write', 'budgets:manage', 'governance:manage', 'usage:read', 'audit:read', 'keys:manage'];
const OPEN = { requests_per_minute: 1000, tokens_per_minute: 1_000_000, burst: 0 };

describe('customer rate limits (CONTRACT §22)', () => {
  it('a customer over its request window gets 429 rate_limit_exceeded param customer, with its window in the headers', async () => {
    const s = await seedProject(g.operator, { scopes: SCOPES, limits: OPEN });
    const api = client(g.t.app, s.secret);
    const set = await api.put(`/v1/projects/${s.projectId}/customers/cus_rl/rate-limits`, { requests_per_minute: 2, tokens_per_minute: null });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ id: 'cus_rl', rate_limits: { requests_per_minute: 2, tokens_per_minute: null }, budget_usd: null });
    expect((await chat(api, 'cus_rl')).status).toBe(200);
    const second = await chat(api, 'cus_rl');
    expect(second.status).toBe(200);
    // The customer's window binds: it has the smallest share left.
    expect([second.headers['x-svc-ratelimit-limit'], second.headers['x-svc-ratelimit-remaining']]).toEqual(['2', '0']);
    const refused = await chat(api, 'cus_rl');
    expectError(refused, 429, 'rate_limit_exceeded', 'customer');
    expect(refused.body.error.message).toMatch(/^The customer's requests window is exhausted \(limit 2\)/);
    expect(refused.headers).toMatchObject({ 'x-svc-ratelimit-limit': '2', 'x-svc-ratelimit-remaining': '0', 'x-svc-ratelimit-resource': 'requests' });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // Another customer and the key alone pass; a minute later the customer passes again.
    expect((await chat(api, 'cus_other')).status).toBe(200);
    expect((await chat(api)).status).toBe(200);
    g.t.clock.advance(60_000);
    expect((await chat(api, 'cus_rl')).status).toBe(200);
  });

  it('a customer token window refuses the reservation that does not fit (param customer, resource tokens)', async () => {
    const s = await seedProject(g.operator, { scopes: SCOPES, limits: OPEN });
    const api = client(g.t.app, s.secret);
    await api.put(`/v1/projects/${s.projectId}/customers/cus_tok/rate-limits`, { requests_per_minute: null, tokens_per_minute: 100 });
    const big = (user: string) => api.post('/v1/chat/completions', { model: PRICED, user, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });
    expect((await big('cus_tok')).status).toBe(200);
    const refused = await big('cus_tok');
    expectError(refused, 429, 'rate_limit_exceeded', 'customer');
    expect(refused.headers['x-svc-ratelimit-resource']).toBe('tokens');
    expect((await big('cus_tok_2')).status).toBe(200);
    g.t.clock.advance(60_000);
  });

  it('new limits start fresh windows at once; null removes a window', async () => {
    const s = await seedProject(g.operator, { scopes: SCOPES, limits: OPEN });
    const api = client(g.t.app, s.secret);
    const url = `/v1/projects/${s.projectId}/customers/cus_new/rate-limits`;
    await api.put(url, { requests_per_minute: 1, tokens_per_minute: null });
    expect((await chat(api, 'cus_new')).status).toBe(200);
    expectError(await chat(api, 'cus_new'), 429, 'rate_limit_exceeded', 'customer');
    await api.put(url, { requests_per_minute: 3, tokens_per_minute: null });
    expect((await chat(api, 'cus_new')).status).toBe(200);
    await api.put(url, { requests_per_minute: null, tokens_per_minute: null });
    for (let i = 0; i < 5; i++) expect((await chat(api, 'cus_new')).status).toBe(200);
    g.t.clock.advance(60_000);
  });

  it('refuses bad limits with 400 invalid_request naming the field', async () => {
    const s = await seedProject(g.operator, { scopes: SCOPES });
    const api = client(g.t.app, s.secret);
    const url = `/v1/projects/${s.projectId}/customers/cus_x/rate-limits`;
    expectError(await api.put(url, { requests_per_minute: 0, tokens_per_minute: null }), 400, 'invalid_request', 'requests_per_minute');
    expectError(await api.put(url, { requests_per_minute: 1.5, tokens_per_minute: null }), 400, 'invalid_request', 'requests_per_minute');
    expectError(await api.put(url, { requests_per_minute: 5 }), 400, 'invalid_request', 'tokens_per_minute');
    expectError(await api.put(url, { requests_per_minute: 5, tokens_per_minute: -1 }), 400, 'invalid_request', 'tokens_per_minute');
    expectError(await api.put(url, { requests_per_minute: 5, tokens_per_minute: 5, burst: 1 }), 400, 'invalid_request', 'burst');
  });

  it.skipIf(!REDIS_URL)('a customer window is shared by two replicas', async () => {
    const s = await seedProject(g.operator, { scopes: SCOPES, limits: OPEN });
    const second = await g.replica();
    const onA = client(g.t.app, s.secret);
    const onB = client(second.app, s.secret);
    await onA.put(`/v1/projects/${s.projectId}/customers/cus_shared/rate-limits`, { requests_per_minute: 3, tokens_per_minute: null });
    const statuses = [];
    for (const api of [onA, onB, onA, onB, onA]) statuses.push((await chat(api, 'cus_shared')).status);
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
    g.t.clock.advance(60_000);
  });
});

describe('the tightest of project, key and customer binds, and the error says which', () => {
  it('rate limits: the project window, the key window, then the customer window', async () => {
    // Two keys of one project (rpm 4 each, and 4 for the project): the customer's rpm 2 binds first.
    const s = await seedProject(g.operator, { scopes: SCOPES, limits: { requests_per_minute: 4, tokens_per_minute: 1_000_000, burst: 0 } });
    const api = client(g.t.app, s.secret);
    // Set by the operator: every call of the key takes from its request window.
    await g.operator.put(`/v1/projects/${s.projectId}/customers/cus_tight/rate-limits`, { requests_per_minute: 2, tokens_per_minute: null });
    expect((await chat(api, 'cus_tight')).status).toBe(200);
    expect((await chat(api, 'cus_tight')).status).toBe(200);
    const customer = await chat(api, 'cus_tight');
    expectError(customer, 429, 'rate_limit_exceeded', 'customer');
    // The key's own window (4, two left) binds the key's other traffic.
    expect((await chat(api, 'cus_loose')).status).toBe(200);
    expect((await chat(api, 'cus_loose')).status).toBe(200);
    const key = await chat(api, 'cus_loose');
    expectError(key, 429, 'rate_limit_exceeded', null);
    expect(key.body.error.message).toMatch(/^The key's requests window/);
    // Another key of the project: the project's window (4, all taken) binds it.
    const other = await g.operator.post('/v1/keys', { project_id: s.projectId, name: 'second', scopes: ['inference:write'] });
    const project = await chat(client(g.t.app, other.body.secret), 'cus_fresh');
    expectError(project, 429, 'rate_limit_exceeded', null);
    expect(project.body.error.message).toMatch(/^The project's requests window/);
    g.t.clock.advance(60_000);
  });

  it('budgets: the key budget, the project budget and the customer budget each stop and are named', async () => {
    const s = await seedProject(g.operator, { scopes: SCOPES, limits: OPEN });
    const api = client(g.t.app, s.secret);
    const probe = await chat(api, 'cus_probe');
    const cost = probe.body.usage.total_tokens;
    // Customer budget: exhausted by the probe above.
    await api.put(`/v1/projects/${s.projectId}/customers/cus_probe/budget`, { budget_usd: cost });
    const customer = await chat(api, 'cus_probe');
    expectError(customer, 429, 'budget_exceeded', 'customer');
    expect(customer.body.error.message).toMatch(/^The customer's monthly budget/);
    // Key budget: a key with room for one request; the customer has room for plenty.
    const budgeted = await g.operator.post('/v1/keys', { project_id: s.projectId, name: 'budgeted', scopes: ['inference:write'], budget_usd: cost });
    const keyApi = client(g.t.app, budgeted.body.secret);
    await api.put(`/v1/projects/${s.projectId}/customers/cus_rich/budget`, { budget_usd: 1_000_000 });
    expect((await chat(keyApi, 'cus_rich')).status).toBe(200);
    const key = await chat(keyApi, 'cus_rich');
    expectError(key, 429, 'budget_exceeded', null);
    expect(key.body.error.message).toMatch(/^The key's monthly budget/);
    // Project budget: the project has spent two requests' worth; a budget of that stops every key and customer.
    await g.operator.put(`/v1/projects/${s.projectId}/budget`, { budget_usd: cost * 2 });
    const project = await chat(api, 'cus_rich');
    expectError(project, 429, 'budget_exceeded', null);
    expect(project.body.error.message).toMatch(/^The project's monthly budget/);
  });
});
