import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { FakeClock } from '../helpers/clock.ts';
import { expectError } from '../helpers/expect.ts';
import { expectHiddenFrom, expectScopeRequired } from '../helpers/security.ts';

let t: TestApp;
let operator: Client;

beforeAll(async () => {
  t = await buildTestApp({ clock: new FakeClock(Date.UTC(2026, 0, 15, 9, 30, 0)) });
  operator = client(t.app);
});
afterAll(() => t.close());

const BUDGET_SCOPES = ['budgets:manage', 'audit:read'];

describe('PUT /v1/projects/{project_id}/budget', () => {
  it('sets the budget, audits and emits policy.updated, and GET reads it back with the month spend', async () => {
    const { projectId, secret } = await seedProject(operator, { scopes: BUDGET_SCOPES });
    const api = client(t.app, secret);
    const res = await api.put(`/v1/projects/${projectId}/budget`, { budget_usd: 250.5 });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      object: 'svc.budget',
      project_id: projectId,
      budget_usd: 250.5,
      spent_usd: 0,
      period: '2026-01',
      updated_at: Math.floor(t.clock.now() / 1000),
    });
    expect((await api.get(`/v1/projects/${projectId}/budget`)).body).toEqual(res.body);

    const audit = await api.get('/v1/audit/events', { query: { action: 'policy.updated' } });
    expect(audit.body.data.map((a: { data: unknown }) => a.data)).toEqual([{ policy: 'budget', budget_usd: 250.5 }]);
    const events = await t.deps.db.event.findMany({ where: { projectId, type: 'policy.updated' } });
    expect(events.map((e) => e.data)).toEqual([{ policy: 'budget', budget_usd: 250.5 }]);
  });

  it('shows no budget until set, and null removes it', async () => {
    const { projectId } = await seedProject(operator);
    expect((await operator.get(`/v1/projects/${projectId}/budget`)).body).toMatchObject({ budget_usd: null, spent_usd: 0, updated_at: null });
    await operator.put(`/v1/projects/${projectId}/budget`, { budget_usd: 1 });
    const removed = await operator.put(`/v1/projects/${projectId}/budget`, { budget_usd: null });
    expect(removed.status).toBe(200);
    expect(removed.body.budget_usd).toBeNull();
  });

  it('keeps money exact to the micro-dollar', async () => {
    const { projectId } = await seedProject(operator);
    const res = await operator.put(`/v1/projects/${projectId}/budget`, { budget_usd: 0.1 + 0.2 });
    expect(res.body.budget_usd).toBe(0.3);
    const row = await t.deps.db.project.findUnique({ where: { id: projectId } });
    expect(row!.budgetMicros).toBe(300_000n);
    // One micro-dollar and zero are budgets; zero refuses every paid request.
    expect((await operator.put(`/v1/projects/${projectId}/budget`, { budget_usd: 0.000001 })).body.budget_usd).toBe(0.000001);
    expect((await operator.put(`/v1/projects/${projectId}/budget`, { budget_usd: 0 })).body.budget_usd).toBe(0);
  });

  it('refuses bad values with 400 invalid_request param budget_usd', async () => {
    const { projectId } = await seedProject(operator);
    for (const body of [{}, { budget_usd: -1 }, { budget_usd: '10' }, { budget_usd: 1e13 }, { budget_usd: true }, { budget_usd: 0.0000001 }]) {
      const res = await operator.put(`/v1/projects/${projectId}/budget`, body);
      expectError(res, 400, 'invalid_request', 'budget_usd');
    }
    expectError(await operator.put(`/v1/projects/${projectId}/budget`, { budget_usd: 1, cap: 2 }), 400, 'invalid_request', 'cap');
    expect((await operator.get(`/v1/projects/${projectId}/budget`)).body.budget_usd).toBeNull();
  });

  it('needs budgets:manage (GET too), and another project looks absent', async () => {
    const { projectId, secret } = await seedProject(operator, { scopes: ['governance:manage', 'inference:write'] });
    await expectScopeRequired(client(t.app, secret), [
      { method: 'put', url: `/v1/projects/${projectId}/budget`, body: { budget_usd: 5 } },
      { method: 'get', url: `/v1/projects/${projectId}/budget` },
    ]);
    const admin = await seedProject(operator, { scopes: BUDGET_SCOPES });
    const theirs = await seedProject(operator);
    await expectHiddenFrom(client(t.app, admin.secret), [
      { method: 'put', url: `/v1/projects/${theirs.projectId}/budget`, body: { budget_usd: 5 } },
      { method: 'get', url: `/v1/projects/${theirs.projectId}/budget` },
    ]);
    await expectHiddenFrom(operator, [{ method: 'put', url: '/v1/projects/prj_00000000000000000000000000/budget', body: { budget_usd: 5 } }]);
    expect((await operator.get(`/v1/projects/${theirs.projectId}/budget`)).body.budget_usd).toBeNull();
  });
});
