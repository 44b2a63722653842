import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, seedProject } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { startReceiver, type Receiver } from '../helpers/https-receiver.ts';
import { expectHiddenFrom, expectScopeRequired } from '../helpers/security.ts';
import { createWebhook, testWorker, webhookEnv } from '../webhooks/support.ts';
import { chat, EMBED, PRICED, startGateway, type Gateway } from './support.ts';

let g: Gateway;
const receivers: Receiver[] = [];
beforeAll(async () => {
  g = await startGateway(webhookEnv());
}, 120_000);
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await g.close();
});

const SCOPES = ['inference:write', 'budgets:manage', 'governance:manage', 'usage:read', 'audit:read'];

describe('budget alerts of a customer (CONTRACT §22, as §7 for keys)', () => {
  it('delivers budget.threshold at 80% and 95% and budget.exceeded at 100%, with the customer in the data, once each', async () => {
    const s = await seedProject(g.operator, { scopes: SCOPES });
    const api = client(g.t.app, s.secret);
    const receiver = await startReceiver();
    receivers.push(receiver);
    const hook = await createWebhook(api, { project_id: s.projectId, url: receiver.url, events: ['budget.threshold', 'budget.exceeded'] });
    receiver.secret = hook.secret;
    // Each chat costs $3 (3 tokens at a dollar a token): $3.50 is crossed at 86% by the first, past 100% by the second.
    await api.put(`/v1/projects/${s.projectId}/customers/cus_alerted/budget`, { budget_usd: 3.5 });
    expect((await chat(api, 'cus_alerted')).status).toBe(200);
    // Written before the next one: one usage batch each, so each alert carries the spend that crossed it.
    await g.t.deps.outcomes.flush();
    expect((await chat(api, 'cus_alerted')).status).toBe(200);
    expectError(await chat(api, 'cus_alerted'), 429, 'budget_exceeded', 'customer');
    // Another customer of the project, without a budget: no alert of its own.
    expect((await chat(api, 'cus_unbudgeted')).status).toBe(200);
    await g.t.deps.outcomes.flush();
    const worker = testWorker(g.t);
    await worker.runDue();
    await worker.stop();
    // The fake clock is weeks behind the receiver's: Stripe's verifier would refuse the timestamp (signing is the
    // webhooks suite's), so the body is read as sent.
    const got = receiver.receipts.map((r) => {
      const event = JSON.parse(r.rawBody) as { type: string; data: unknown };
      expect(r.headers['x-svc-event']).toBe(event.type);
      return { type: event.type, data: event.data };
    });
    const common = { key_id: null, customer: 'cus_alerted', project_id: s.projectId, budget_usd: 3.5, period: '2026-11' };
    expect(got).toEqual([
      { type: 'budget.threshold', data: { ...common, spent_usd: 3, threshold: 0.8 } },
      { type: 'budget.threshold', data: { ...common, spent_usd: 6, threshold: 0.95 } },
      { type: 'budget.exceeded', data: { ...common, spent_usd: 6, threshold: 1 } },
    ]);
  });
});

describe('usage per customer', () => {
  it('GET /v1/usage?customer= lists that customer\'s records (chat and embeddings), and granularity=day sums them', async () => {
    const s = await seedProject(g.operator, { scopes: SCOPES });
    const api = client(g.t.app, s.secret);
    await chat(api, 'cus_u1');
    await chat(api, 'cus_u2');
    await chat(api);
    const embedded = await api.post('/v1/embeddings', { model: EMBED, input: 'hello', user: 'cus_u1' });
    expect(embedded.status).toBe(200);
    const one = await api.get('/v1/usage', { query: { customer: 'cus_u1' } });
    expect(one.status).toBe(200);
    expect(one.body.data.map((r: { model: string; customer: string }) => [r.model, r.customer])).toEqual([
      [EMBED, 'cus_u1'],
      [PRICED, 'cus_u1'],
    ]);
    const all = await api.get('/v1/usage');
    // A record without a customer has no customer field.
    expect(all.body.data.map((r: { customer?: string }) => r.customer ?? null)).toEqual(['cus_u1', null, 'cus_u2', 'cus_u1']);
    const days = await api.get('/v1/usage', { query: { customer: 'cus_u2', granularity: 'day' } });
    expect(days.body.data).toEqual([{ object: 'svc.usage_day', date: '2026-11-14', requests: 1, prompt_tokens: 2, completion_tokens: 1, cost_usd: 3 }]);
    expect((await api.get('/v1/usage', { query: { customer: 'cus_nobody' } })).body.data).toEqual([]);
    expectError(await api.get('/v1/usage', { query: { customer: '' } }), 400, 'invalid_request', 'customer');
  });
});

describe('GET and list customers', () => {
  it('lists the customers inferences named or whose bounds were set, newest first, with their month\'s spend', async () => {
    const s = await seedProject(g.operator, { scopes: SCOPES });
    const api = client(g.t.app, s.secret);
    await chat(api, 'cus_first');
    g.t.clock.advance(1_000);
    await chat(api, 'cus_second');
    await chat(api, 'cus_second');
    g.t.clock.advance(1_000);
    await api.put(`/v1/projects/${s.projectId}/customers/cus_third/rate-limits`, { requests_per_minute: 10, tokens_per_minute: 1000 });
    const list = await api.get(`/v1/projects/${s.projectId}/customers`);
    expect(list.status).toBe(200);
    expect(list.headers['x-svc-has-more']).toBe('false');
    expect(list.body).toMatchObject({ object: 'list', has_more: false, url: `/v1/projects/${s.projectId}/customers` });
    expect(list.body.data.map((c: { id: string; spent_usd: number }) => [c.id, c.spent_usd])).toEqual([
      ['cus_third', 0],
      ['cus_second', 6],
      ['cus_first', 3],
    ]);
    const page = await api.get(`/v1/projects/${s.projectId}/customers`, { query: { limit: 1, starting_after: 'cus_third' } });
    expect([page.body.data.map((c: { id: string }) => c.id), page.body.has_more]).toEqual([['cus_second'], true]);
    const back = await api.get(`/v1/projects/${s.projectId}/customers`, { query: { ending_before: 'cus_first' } });
    expect(back.body.data.map((c: { id: string }) => c.id)).toEqual(['cus_third', 'cus_second']);
    expectError(await api.get(`/v1/projects/${s.projectId}/customers`, { query: { starting_after: 'cus_unknown' } }), 400, 'invalid_request', 'starting_after');

    const third = await api.get(`/v1/projects/${s.projectId}/customers/cus_third`);
    expect(third.body).toEqual({
      id: 'cus_third',
      object: 'svc.customer',
      project_id: s.projectId,
      budget_usd: null,
      hard_stop: true,
      spent_usd: 0,
      period: '2026-11',
      rate_limits: { requests_per_minute: 10, tokens_per_minute: 1000 },
      created_at: Math.floor(g.t.clock.now() / 1000),
      updated_at: Math.floor(g.t.clock.now() / 1000),
    });
    expectError(await api.get(`/v1/projects/${s.projectId}/customers/cus_unknown`), 404, 'not_found', 'customer');
    // A customer id with characters a path must escape.
    expect((await chat(api, 'user@example.com/7')).status).toBe(200);
    const escaped = await api.get(`/v1/projects/${s.projectId}/customers/${encodeURIComponent('user@example.com/7')}`);
    expect([escaped.status, escaped.body.id, escaped.body.spent_usd]).toEqual([200, 'user@example.com/7', 3]);
  });

  it('audits and emits policy.updated with the customer', async () => {
    const s = await seedProject(g.operator, { scopes: SCOPES });
    const api = client(g.t.app, s.secret);
    await api.put(`/v1/projects/${s.projectId}/customers/cus_audit/budget`, { budget_usd: 12.5, hard_stop: false });
    await api.put(`/v1/projects/${s.projectId}/customers/cus_audit/rate-limits`, { requests_per_minute: 5, tokens_per_minute: null });
    const audit = await api.get('/v1/audit/events', { query: { action: 'policy.updated' } });
    const expected = [
      { policy: 'rate_limits', customer: 'cus_audit', requests_per_minute: 5, tokens_per_minute: null },
      { policy: 'budget', customer: 'cus_audit', budget_usd: 12.5, hard_stop: false },
    ];
    expect(audit.body.data.map((a: { data: unknown }) => a.data)).toEqual(expected);
    const events = await g.t.deps.db.event.findMany({ where: { projectId: s.projectId, type: 'policy.updated' }, orderBy: { id: 'desc' } });
    expect(events.map((e) => e.data)).toEqual(expected);
  });

  it('refuses bad input with 400 invalid_request naming the field', async () => {
    const s = await seedProject(g.operator, { scopes: SCOPES });
    const api = client(g.t.app, s.secret);
    const url = `/v1/projects/${s.projectId}/customers/cus_bad/budget`;
    for (const body of [{}, { budget_usd: -1 }, { budget_usd: '5' }, { budget_usd: 0.0000001 }]) expectError(await api.put(url, body), 400, 'invalid_request', 'budget_usd');
    expectError(await api.put(url, { budget_usd: 5, hard_stop: 'yes' }), 400, 'invalid_request', 'hard_stop');
    expectError(await api.put(url, { budget_usd: 5, cap: 1 }), 400, 'invalid_request', 'cap');
    for (const id of [encodeURIComponent(' padded'), encodeURIComponent('caf\u00e9'), encodeURIComponent('tab\there')]) {
      expectError(await api.put(`/v1/projects/${s.projectId}/customers/${id}/budget`, { budget_usd: 5 }), 400, 'invalid_request', 'customer');
      expectError(await api.get(`/v1/projects/${s.projectId}/customers/${id}`), 400, 'invalid_request', 'customer');
    }
  });

  it('a project guarding budget and rate_limits guards its customers\' too: 403 dual_control_required, applied on approval', async () => {
    const s = await seedProject(g.operator, { scopes: SCOPES });
    const api = client(g.t.app, s.secret);
    const approver = await g.operator.post('/v1/keys', { project_id: s.projectId, name: 'approver', scopes: ['governance:manage'] });
    expect((await api.put(`/v1/projects/${s.projectId}/governance`, { dual_control: ['budget', 'rate_limits'] })).status).toBe(200);
    const budget = await api.put(`/v1/projects/${s.projectId}/customers/cus_dc/budget`, { budget_usd: 7 });
    const limits = await api.put(`/v1/projects/${s.projectId}/customers/cus_dc/rate-limits`, { requests_per_minute: 3, tokens_per_minute: null });
    for (const res of [budget, limits]) {
      expect([res.status, res.body.error.code, res.headers['x-svc-approval-id']]).toEqual([403, 'dual_control_required', res.body.error.approval_id]);
    }
    expectError(await api.get(`/v1/projects/${s.projectId}/customers/cus_dc`), 404, 'not_found', 'customer');
    const approve = client(g.t.app, approver.body.secret);
    for (const res of [budget, limits]) {
      const decided = await approve.post(`/v1/approvals/${res.body.error.approval_id}/approve`);
      expect([decided.status, decided.body.status], decided.raw).toEqual([200, 'approved']);
    }
    const after = await api.get(`/v1/projects/${s.projectId}/customers/cus_dc`);
    expect(after.body).toMatchObject({ budget_usd: 7, rate_limits: { requests_per_minute: 3, tokens_per_minute: null } });
  });

  it('needs its scopes, and another project looks absent', async () => {
    const s = await seedProject(g.operator, { scopes: ['inference:write'] });
    const none = client(g.t.app, s.secret);
    await expectScopeRequired(none, [
      { method: 'put', url: `/v1/projects/${s.projectId}/customers/c1/budget`, body: { budget_usd: 1 } },
      { method: 'put', url: `/v1/projects/${s.projectId}/customers/c1/rate-limits`, body: { requests_per_minute: 1, tokens_per_minute: 1 } },
      { method: 'get', url: `/v1/projects/${s.projectId}/customers/c1` },
      { method: 'get', url: `/v1/projects/${s.projectId}/customers` },
    ]);
    // budgets:manage sets a budget but not windows (governance:manage), as for the project.
    const budgets = await seedProject(g.operator, { scopes: ['budgets:manage'] });
    const b = client(g.t.app, budgets.secret);
    expect((await b.put(`/v1/projects/${budgets.projectId}/customers/c1/budget`, { budget_usd: 1 })).status).toBe(200);
    await expectScopeRequired(b, [{ method: 'put', url: `/v1/projects/${budgets.projectId}/customers/c1/rate-limits`, body: { requests_per_minute: 1, tokens_per_minute: 1 } }]);
    // usage:read reads.
    const reader = await seedProject(g.operator, { scopes: ['usage:read'] });
    expect((await client(g.t.app, reader.secret).get(`/v1/projects/${reader.projectId}/customers`)).status).toBe(200);

    const theirs = await seedProject(g.operator, { scopes: SCOPES });
    await client(g.t.app, theirs.secret).put(`/v1/projects/${theirs.projectId}/customers/c1/budget`, { budget_usd: 1 });
    const mine = client(g.t.app, (await seedProject(g.operator, { scopes: SCOPES })).secret);
    await expectHiddenFrom(mine, [
      { method: 'put', url: `/v1/projects/${theirs.projectId}/customers/c1/budget`, body: { budget_usd: 1 } },
      { method: 'put', url: `/v1/projects/${theirs.projectId}/customers/c1/rate-limits`, body: { requests_per_minute: 1, tokens_per_minute: 1 } },
      { method: 'get', url: `/v1/projects/${theirs.projectId}/customers/c1` },
      { method: 'get', url: `/v1/projects/${theirs.projectId}/customers` },
    ]);
  });
});
