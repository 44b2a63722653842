import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, seedProject, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { REDIS_URL } from '../helpers/services.ts';
import { chat, startGateway, type Gateway } from './support.ts';

let g: Gateway;
beforeAll(async () => {
  g = await startGateway();
}, 120_000);
afterAll(() => g.close());

const SCOPES = ['inference:write', 'budgets:manage', 'governance:manage', 'usage:read', 'audit:read'];

describe('a customer budget (CONTRACT §22)', () => {
  it('stops one customer of a key at its budget (429 budget_exceeded, param customer) while another passes', async () => {
    const s = await seedProject(g.operator, { scopes: SCOPES });
    const api = client(g.t.app, s.secret);
    const first = await chat(api, 'cus_alice');
    expect(first.status).toBe(200);
    const cost = first.body.usage.total_tokens; // a dollar a token
    const set = await api.put(`/v1/projects/${s.projectId}/customers/cus_alice/budget`, { budget_usd: cost * 2 });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ id: 'cus_alice', object: 'svc.customer', project_id: s.projectId, budget_usd: cost * 2, hard_stop: true, spent_usd: cost });

    expect((await chat(api, 'cus_alice')).status).toBe(200);
    const stopped = await chat(api, 'cus_alice');
    expectError(stopped, 429, 'budget_exceeded', 'customer');
    expect(stopped.body.error.message).toMatch(/customer's monthly budget/);
    expect(stopped.headers['retry-after']).toBeUndefined();
    // The other customer of the same key, and the key without a customer, still pass.
    expect((await chat(api, 'cus_bob')).status).toBe(200);
    expect((await chat(api)).status).toBe(200);

    const alice = await api.get(`/v1/projects/${s.projectId}/customers/cus_alice`);
    expect(alice.body).toMatchObject({ budget_usd: cost * 2, spent_usd: cost * 2, period: '2026-11' });
    // The refused request is a usage record of the customer, failed with the code.
    const usage = await api.get('/v1/usage', { query: { customer: 'cus_alice' } });
    expect(usage.body.data.map((r: { status: string; error_code: string | null; customer: string }) => [r.status, r.error_code, r.customer])).toEqual([
      ['failed', 'budget_exceeded', 'cus_alice'],
      ['succeeded', null, 'cus_alice'],
      ['succeeded', null, 'cus_alice'],
    ]);
  });

  it('hard_stop false only alerts; raising the budget lets the customer through again at once', async () => {
    const s = await seedProject(g.operator, { scopes: SCOPES });
    const api = client(g.t.app, s.secret);
    const put = (budget_usd: number, hard_stop?: boolean) =>
      api.put(`/v1/projects/${s.projectId}/customers/cus_soft/budget`, { budget_usd, ...(hard_stop !== undefined ? { hard_stop } : {}) });
    expect((await put(1)).body.hard_stop).toBe(true);
    expect((await chat(api, 'cus_soft')).status).toBe(200);
    expectError(await chat(api, 'cus_soft'), 429, 'budget_exceeded', 'customer');
    expect((await put(1, false)).body).toMatchObject({ hard_stop: false, budget_usd: 1 });
    expect((await chat(api, 'cus_soft')).status).toBe(200);
    await put(1);
    expectError(await chat(api, 'cus_soft'), 429, 'budget_exceeded', 'customer');
    await put(1000);
    expect((await chat(api, 'cus_soft')).status).toBe(200);
  });

  it.skipIf(!REDIS_URL)('holds across two replicas sharing Redis and PostgreSQL', async () => {
    const s = await seedProject(g.operator, { scopes: SCOPES });
    const second: TestApp = await g.replica();
    const onA = client(g.t.app, s.secret);
    const onB = client(second.app, s.secret);
    const probe = await chat(onA, 'cus_probe');
    const cost = probe.body.usage.total_tokens;
    // Room for exactly three requests; the budget set on A binds B's next request.
    await onA.put(`/v1/projects/${s.projectId}/customers/cus_carol/budget`, { budget_usd: cost * 3 });
    const answers = [];
    for (const api of [onB, onA, onB, onA, onB]) answers.push((await chat(api, 'cus_carol')).status);
    expect(answers).toEqual([200, 200, 200, 429, 429]);
    expectError(await chat(onB, 'cus_carol'), 429, 'budget_exceeded', 'customer');
    // The other customer passes on both.
    expect([(await chat(onA, 'cus_dave')).status, (await chat(onB, 'cus_dave')).status]).toEqual([200, 200]);
    expect((await onB.get(`/v1/projects/${s.projectId}/customers/cus_carol`)).body.spent_usd).toBe(cost * 3);
  });
});
