import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expireOverdueApprovals } from '../../src/domain/governance/approvals.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { startReceiver, type Receiver } from '../helpers/https-receiver.ts';
import { expectHiddenFrom, expectScopeRequired } from '../helpers/security.ts';
import { uniqueName } from '../helpers/services.ts';
import { expectGqlError, expectGqlHiddenFrom, gqlClient, type Gql } from '../graphql/gql.ts';
import { testWorker, webhookEnv } from '../webhooks/support.ts';
import { expectGqlQueued, expectQueued, governedProject, type Governed } from './support.ts';

let t: TestApp;
let operator: Client;
let gql: Gql;
const receivers: Receiver[] = [];

beforeAll(async () => {
  t = await buildTestApp({ env: webhookEnv() });
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await t.close();
});

// High enough that the approved limits never throttle the test's own calls.
const LIMITS = { requests_per_minute: 7000, tokens_per_minute: 700_000, burst: 0 };
const RPM = LIMITS.requests_per_minute;
const as = (secret: string) => client(t.app, secret);

/** Queues a rate-limit change by the requester and returns the approval's id. */
async function queueLimits(g: Governed, limits = LIMITS): Promise<string> {
  return expectQueued(await as(g.requester.secret).put(`/v1/projects/${g.projectId}/rate-limits`, limits));
}

async function anotherApprover(g: Governed, scopes = ['governance:manage']) {
  const res = await operator.post('/v1/keys', { project_id: g.projectId, name: uniqueName('approver'), scopes });
  expect(res.status, res.raw).toBe(200);
  return { id: res.body.id as string, secret: res.body.secret as string };
}

async function auditOf(projectId: string, action: string) {
  const res = await operator.get('/v1/audit/events', { query: { project_id: projectId, action } });
  expect(res.status, res.raw).toBe(200);
  return res.body.data as any[];
}

async function eventsOf(projectId: string, type: string) {
  return t.deps.db.event.findMany({ where: { projectId, type }, orderBy: { id: 'asc' } });
}

describe('segregation of duties', () => {
  it('refuses the requester approving or rejecting its own change (409), on REST and GraphQL', async () => {
    const g = await governedProject(operator, ['rate_limits']);
    const id = await queueLimits(g);
    const self = as(g.requester.secret);
    expectError(await self.post(`/v1/approvals/${id}/approve`), 409, 'segregation_of_duties');
    expectError(await self.post(`/v1/approvals/${id}/reject`, { reason: 'mine' }), 409, 'segregation_of_duties');
    const res = await gql('mutation($id: ID!) { approveApproval(id: $id) { id } }', { id }, { key: g.requester.secret });
    expectGqlError(res, 'segregation_of_duties', { httpStatus: 409, path: ['approveApproval'] });
    expect((await operator.get(`/v1/approvals/${id}`)).body.status).toBe('pending');
    expect((await operator.get(`/v1/projects/${g.projectId}/rate-limits`)).body.requests_per_minute).not.toBe(RPM);
  });

  it('counts the operator as one identity: it cannot approve its own change, a project key can', async () => {
    const g = await governedProject(operator, ['budget']);
    const id = expectQueued(await operator.put(`/v1/projects/${g.projectId}/budget`, { budget_usd: 3 }));
    expect((await operator.get(`/v1/approvals/${id}`)).body.requested_by).toBe('key_master');
    expectError(await operator.post(`/v1/approvals/${id}/approve`), 409, 'segregation_of_duties');
    const approved = await as(g.approver.secret).post(`/v1/approvals/${id}/approve`);
    expect(approved.body).toMatchObject({ status: 'approved', decided_by: g.approver.id });
    expect((await operator.get(`/v1/projects/${g.projectId}/budget`)).body.budget_usd).toBe(3);
  });
});

describe('two approvers at once', () => {
  it('lets exactly one decision win; the other gets 400 invalid_request, and the change applies once', async () => {
    for (let round = 0; round < 3; round++) {
      const g = await governedProject(operator, ['rate_limits']);
      const b = await anotherApprover(g);
      const id = await queueLimits(g, { ...LIMITS, burst: round });
      const [x, y] = await Promise.all([as(g.approver.secret).post(`/v1/approvals/${id}/approve`), as(b.secret).post(`/v1/approvals/${id}/approve`)]);
      const statuses = [x.status, y.status].sort();
      expect(statuses, `${x.raw} ${y.raw}`).toEqual([200, 400]);
      const loser = x.status === 400 ? x : y;
      expectError(loser, 400, 'invalid_request', 'approval_id');
      expect((await eventsOf(g.projectId, 'approval.approved')).length).toBe(1);
      expect((await eventsOf(g.projectId, 'policy.updated')).filter((e: any) => e.data.policy === 'rate_limits')).toHaveLength(1);
      expect(await auditOf(g.projectId, 'approval.approve')).toHaveLength(1);
    }
  });

  it('lets exactly one of an approve and a reject win', async () => {
    const g = await governedProject(operator, ['rate_limits']);
    const b = await anotherApprover(g);
    const id = await queueLimits(g);
    const [x, y] = await Promise.all([as(g.approver.secret).post(`/v1/approvals/${id}/approve`), as(b.secret).post(`/v1/approvals/${id}/reject`, {})]);
    expect([x.status, y.status].filter((s) => s === 200)).toHaveLength(1);
    const final = (await operator.get(`/v1/approvals/${id}`)).body.status;
    const limits = (await operator.get(`/v1/projects/${g.projectId}/rate-limits`)).body.requests_per_minute;
    expect(final === 'approved' ? limits === RPM : final === 'rejected' && limits !== RPM).toBe(true);
  });
});

describe('expiry', () => {
  it('expires after 24 hours on the clock: shown expired, marked and audited by the worker, approving refused', async () => {
    const g = await governedProject(operator, ['rate_limits']);
    const id = await queueLimits(g);
    t.clock.advanceHours(23.99);
    expect((await operator.get(`/v1/approvals/${id}`)).body.status).toBe('pending');
    t.clock.advanceHours(0.02);
    expect((await operator.get(`/v1/approvals/${id}`)).body.status).toBe('expired');
    const pending = await operator.get('/v1/approvals', { query: { project_id: g.projectId, status: 'pending' } });
    expect(pending.body.data).toEqual([]);
    const expired = await operator.get('/v1/approvals', { query: { project_id: g.projectId, status: 'expired' } });
    expect(expired.body.data.map((a: any) => a.id)).toEqual([id]);

    expect(await expireOverdueApprovals(t.deps.db, new Date(t.clock.now()))).toBeGreaterThanOrEqual(1);
    expect(await expireOverdueApprovals(t.deps.db, new Date(t.clock.now()))).toBe(0);
    const row = await t.deps.db.approval.findUniqueOrThrow({ where: { id } });
    expect(row.status).toBe('expired');
    const [audit] = await auditOf(g.projectId, 'approval.expire');
    expect(audit).toMatchObject({ target_id: id, actor_key_id: null });

    expectError(await as(g.approver.secret).post(`/v1/approvals/${id}/approve`), 400, 'invalid_request', 'approval_id');
    expect((await operator.get(`/v1/projects/${g.projectId}/rate-limits`)).body.requests_per_minute).not.toBe(RPM);
  });

  it('refuses approving one past its expiry even before the worker marked it, and marks it then', async () => {
    const g = await governedProject(operator, ['rate_limits']);
    const id = await queueLimits(g);
    t.clock.advanceHours(25);
    expectError(await as(g.approver.secret).post(`/v1/approvals/${id}/approve`), 400, 'invalid_request', 'approval_id');
    expect((await t.deps.db.approval.findUniqueOrThrow({ where: { id } })).status).toBe('expired');
    expect(await auditOf(g.projectId, 'approval.expire')).toHaveLength(1);
  });
});

describe('a change no longer valid when approved', () => {
  it('ends failed with the error when the key it rotates was revoked meanwhile', async () => {
    const g = await governedProject(operator, ['keys']);
    const target = await operator.post('/v1/keys', { project_id: g.projectId, name: uniqueName('t'), scopes: ['usage:read'] });
    // The operator's own create is guarded too: a second key approves it; the new secret is the requester's to claim
    // (issue 36: never in the approver's answer).
    const createId = expectQueued(target);
    const created = await as(g.approver.secret).post(`/v1/approvals/${createId}/approve`);
    expect(created.body).toMatchObject({ status: 'approved', result_id: expect.stringMatching(/^key_/), secret_delivery: 'awaiting_claim' });
    expect(created.body.secret).toBeUndefined();
    expect((await operator.post(`/v1/approvals/${createId}/claim`)).body.secret).toMatch(/^svc_sk_/);
    const keyId = created.body.result_id;

    const rotateId = expectQueued(await as(g.requester.secret).post(`/v1/keys/${keyId}/rotate`, {}));
    const revokeId = expectQueued(await operator.post(`/v1/keys/${keyId}/revoke`));
    expect((await as(g.approver.secret).post(`/v1/approvals/${revokeId}/approve`)).body.status).toBe('approved');

    const failed = await as(g.approver.secret).post(`/v1/approvals/${rotateId}/approve`);
    expect(failed.status, failed.raw).toBe(200);
    expect(failed.body).toMatchObject({ status: 'failed', decided_by: g.approver.id, error: { code: 'invalid_request', param: 'key_id' } });
    expect(failed.body.secret).toBeUndefined();
    expect((await eventsOf(g.projectId, 'key.rotated'))).toHaveLength(0);
    expect((await eventsOf(g.projectId, 'approval.approved')).map((e: any) => e.data.approval_id)).not.toContain(rotateId);
    const audits = await auditOf(g.projectId, 'approval.approve');
    expect(audits.find((a) => a.target_id === rotateId)?.data).toMatchObject({ status: 'failed', error: { code: 'invalid_request' } });
    // Decided: approving again is refused.
    expectError(await as(g.approver.secret).post(`/v1/approvals/${rotateId}/approve`), 400, 'invalid_request', 'approval_id');
  });

  it('ends failed when the requesting key was revoked meanwhile, and applies nothing', async () => {
    const g = await governedProject(operator, ['rate_limits']);
    const id = await queueLimits(g);
    expect((await operator.post(`/v1/keys/${g.requester.id}/revoke`)).status).toBe(200);
    const res = await gql('mutation($id: ID!) { approveApproval(id: $id) { status error } }', { id }, { key: g.approver.secret });
    expect(res.body.data.approveApproval, res.raw).toMatchObject({ status: 'failed', error: { code: 'invalid_api_key' } });
    expect((await operator.get(`/v1/projects/${g.projectId}/rate-limits`)).body.requests_per_minute).not.toBe(RPM);
  });
});

describe('events and audit', () => {
  it("delivers approval.approved, the change's policy.updated and approval.rejected to a webhook receiver", async () => {
    const r = await startReceiver();
    receivers.push(r);
    const g = await governedProject(operator, []);
    const hook = await operator.post('/v1/webhooks', {
      project_id: g.projectId,
      url: r.url,
      events: ['approval.approved', 'approval.rejected', 'policy.updated'],
    });
    expect(hook.status, hook.raw).toBe(200);
    r.secret = hook.body.secret;
    expect((await operator.put(`/v1/projects/${g.projectId}/governance`, { dual_control: ['rate_limits'] })).status).toBe(200);
    const approved = await queueLimits(g);
    const rejected = await queueLimits(g, { ...LIMITS, burst: 5 });
    expect((await as(g.approver.secret).post(`/v1/approvals/${approved}/approve`)).status).toBe(200);
    const rej = await as(g.approver.secret).post(`/v1/approvals/${rejected}/reject`, { reason: 'burst too high' });
    expect(rej.body).toMatchObject({ status: 'rejected', reason: 'burst too high', decided_by: g.approver.id });

    const worker = testWorker(t);
    await worker.runDue();
    await worker.stop();
    await r.waitFor(4);
    expect(r.receipts.every((x) => x.verifyError === null)).toBe(true);
    const got = r.receipts.map((x) => ({ type: x.event!.type, data: x.event!.data }));
    expect(got).toEqual(
      expect.arrayContaining([
        { type: 'policy.updated', data: { policy: 'governance', dual_control: ['rate_limits'] } },
        { type: 'approval.approved', data: { approval_id: approved, action: 'rate_limits.update', requested_by: g.requester.id, decided_by: g.approver.id } },
        { type: 'policy.updated', data: { policy: 'rate_limits', ...LIMITS } },
        { type: 'approval.rejected', data: { approval_id: rejected, action: 'rate_limits.update', requested_by: g.requester.id, decided_by: g.approver.id } },
      ]),
    );
    expect(got).toHaveLength(4);
  });

  it('writes the trail: approval.create by the requester, approval.approve by the approver, the change by the requester', async () => {
    const g = await governedProject(operator, ['rate_limits']);
    const id = await queueLimits(g);
    await as(g.approver.secret).post(`/v1/approvals/${id}/approve`);
    const [created] = await auditOf(g.projectId, 'approval.create');
    expect(created).toMatchObject({ actor_key_id: g.requester.id, target_id: id, data: { action: 'rate_limits.update', request: LIMITS } });
    const [approved] = await auditOf(g.projectId, 'approval.approve');
    expect(approved).toMatchObject({ actor_key_id: g.approver.id, target_id: id, data: { status: 'approved' } });
    const changes = (await auditOf(g.projectId, 'policy.updated')).filter((a) => a.data.policy === 'rate_limits');
    expect(changes).toHaveLength(1);
    expect(changes[0]).toMatchObject({ actor_key_id: g.requester.id, request_id: approved.request_id });
  });
});

describe('reading approvals', () => {
  it('lists newest first with a status filter and cursor pagination, on REST and GraphQL', async () => {
    const g = await governedProject(operator, ['rate_limits']);
    const ids = [await queueLimits(g), await queueLimits(g, { ...LIMITS, burst: 1 }), await queueLimits(g, { ...LIMITS, burst: 2 })];
    await as(g.approver.secret).post(`/v1/approvals/${ids[0]}/approve`);
    await as(g.approver.secret).post(`/v1/approvals/${ids[1]}/reject`);
    const api = as(g.approver.secret);
    const all = await api.get('/v1/approvals');
    expect(all.body.data.map((a: any) => a.id)).toEqual([...ids].reverse());
    expect(all.body).toMatchObject({ object: 'list', has_more: false, url: '/v1/approvals' });
    for (const [status, id] of [['approved', ids[0]], ['rejected', ids[1]], ['pending', ids[2]]] as const) {
      expect((await api.get('/v1/approvals', { query: { status } })).body.data.map((a: any) => a.id)).toEqual([id]);
    }
    expect((await api.get('/v1/approvals', { query: { status: 'failed' } })).body.data).toEqual([]);
    const first = await api.get('/v1/approvals', { query: { limit: 1 } });
    expect(first.body).toMatchObject({ has_more: true });
    expect(first.headers['x-svc-has-more']).toBe('true');
    const second = await api.get('/v1/approvals', { query: { limit: 1, starting_after: first.body.data[0].id } });
    expect(second.status, second.raw).toBe(200);
    expect(second.body.data.map((a: any) => a.id)).toEqual([ids[1]]);
    const back = await api.get('/v1/approvals', { query: { limit: 5, ending_before: ids[0] } });
    expect(back.body.data.map((a: any) => a.id)).toEqual([ids[2], ids[1]]);
    expectError(await api.get('/v1/approvals', { query: { status: 'maybe' } }), 400, 'invalid_request', 'status');
    expectError(await api.get('/v1/approvals', { query: { limit: 0 } }), 400, 'invalid_request', 'limit');
    expectError(await api.get('/v1/approvals', { query: { starting_after: g.requester.id } }), 400, 'invalid_request', 'starting_after');

    const res = await gql('{ approvals(status: "pending", first: 5) { edges { node { id status action requestedBy request before } } pageInfo { hasNextPage } } }', {}, { key: g.approver.secret });
    expect(res.body.data.approvals.edges.map((e: any) => e.node), res.raw).toEqual([
      { id: ids[2], status: 'pending', action: 'rate_limits.update', requestedBy: g.requester.id, request: { ...LIMITS, burst: 2 }, before: { requests_per_minute: 60, tokens_per_minute: 100_000, burst: 0 } },
    ]);
  });

  it("shows the before state and the request as the change's diff", async () => {
    const g = await governedProject(operator, ['residency']);
    const id = expectQueued(await as(g.requester.secret).put(`/v1/projects/${g.projectId}/residency`, { region: 'eu-west-1' }));
    const a = (await operator.get(`/v1/approvals/${id}`)).body;
    expect(a).toMatchObject({ resource: 'residency', params: { project_id: g.projectId }, before: { region: null }, request: { region: 'eu-west-1' } });
  });

  it("hides another project's approvals (404) on REST and GraphQL", async () => {
    const g = await governedProject(operator, ['rate_limits']);
    const id = await queueLimits(g);
    const other = await seedProject(operator, { scopes: ['governance:manage'] });
    const api = as(other.secret);
    await expectHiddenFrom(api, [
      { method: 'get', url: `/v1/approvals/${id}` },
      { method: 'post', url: `/v1/approvals/${id}/approve` },
      { method: 'post', url: `/v1/approvals/${id}/reject`, body: {} },
      { method: 'get', url: `/v1/approvals?project_id=${g.projectId}` },
      { method: 'put', url: `/v1/projects/${g.projectId}/governance`, body: { dual_control: [] } },
      { method: 'get', url: `/v1/projects/${g.projectId}/governance` },
      { method: 'put', url: `/v1/projects/${g.projectId}/residency`, body: { region: null } },
    ]);
    expect((await api.get('/v1/approvals')).body.data).toEqual([]);
    await expectGqlHiddenFrom(gql, other.secret, [
      { field: 'approval', query: 'query($id: ID!) { approval(id: $id) { id } }', variables: { id } },
      { field: 'approveApproval', query: 'mutation($id: ID!) { approveApproval(id: $id) { id } }', variables: { id } },
      { field: 'rejectApproval', query: 'mutation($id: ID!) { rejectApproval(id: $id) { id } }', variables: { id } },
      { field: 'governancePolicy', query: 'query($p: ID!) { governancePolicy(projectId: $p) { dualControl } }', variables: { p: g.projectId } },
    ]);
    expect((await operator.get(`/v1/approvals/${id}`)).body.status).toBe('pending');
  });

  it('needs governance:manage or risk:approve; a risk:approve key may approve', async () => {
    const g = await governedProject(operator, ['rate_limits'], ['risk:approve']);
    const id = await queueLimits(g);
    const reader = await anotherApprover(g, ['usage:read']);
    await expectScopeRequired(as(reader.secret), [
      { method: 'get', url: '/v1/approvals' },
      { method: 'get', url: `/v1/approvals/${id}` },
      { method: 'post', url: `/v1/approvals/${id}/approve` },
      { method: 'post', url: `/v1/approvals/${id}/reject`, body: {} },
      { method: 'get', url: `/v1/projects/${g.projectId}/governance` },
      { method: 'put', url: `/v1/projects/${g.projectId}/governance`, body: { dual_control: [] } },
      { method: 'put', url: `/v1/projects/${g.projectId}/residency`, body: { region: null } },
    ]);
    // risk:approve alone cannot change the policy, but decides approvals.
    expectError(await as(g.approver.secret).put(`/v1/projects/${g.projectId}/governance`, { dual_control: [] }), 403, 'insufficient_scope');
    const approved = await as(g.approver.secret).post(`/v1/approvals/${id}/approve`);
    expect(approved.body).toMatchObject({ status: 'approved', decided_by: g.approver.id });
  });

  it('refuses a reason that is not a short string (400 param reason)', async () => {
    const g = await governedProject(operator, ['rate_limits']);
    const id = await queueLimits(g);
    expectError(await as(g.approver.secret).post(`/v1/approvals/${id}/reject`, { reason: 5 }), 400, 'invalid_request', 'reason');
    expectError(await as(g.approver.secret).post(`/v1/approvals/${id}/reject`, { reason: 'x'.repeat(1001) }), 400, 'invalid_request', 'reason');
    expect((await operator.get(`/v1/approvals/${id}`)).body.status).toBe('pending');
  });
});

describe('the guard', () => {
  it("validates the change first: a bad change is refused at once with the service's own error, nothing queued", async () => {
    const g = await governedProject(operator, ['rate_limits', 'keys']);
    const api = as(g.requester.secret);
    expectError(await api.put(`/v1/projects/${g.projectId}/rate-limits`, { ...LIMITS, burst: -1 }), 400, 'invalid_request', 'burst');
    // A key may only grant scopes it holds: checked by the dry run against the database, as the real call would.
    expectError(await api.post('/v1/keys', { project_id: g.projectId, name: 'x', scopes: ['risk:approve'] }), 403, 'insufficient_scope');
    expectError(await api.post('/v1/keys/key_00000000000000000000000000/revoke'), 404, 'not_found', 'key_id');
    const res = await gql('mutation($p: ID!) { updateRateLimits(projectId: $p, input: {requestsPerMinute: 0, tokensPerMinute: 1, burst: 0}) { burst } }', { p: g.projectId }, { key: g.requester.secret });
    expectGqlError(res, 'invalid_request', { param: 'requests_per_minute' });
    expect((await operator.get('/v1/approvals', { query: { project_id: g.projectId } })).body.data).toEqual([]);
  });

  it('leaves unlisted resources and other projects alone', async () => {
    const g = await governedProject(operator, ['budget']);
    expect((await as(g.requester.secret).put(`/v1/projects/${g.projectId}/rate-limits`, LIMITS)).status).toBe(200);
    const free = await seedProject(operator);
    expect((await operator.put(`/v1/projects/${free.projectId}/budget`, { budget_usd: 1 })).status).toBe(200);
  });

  it("finds the project of an id-addressed change for the operator (a key by its id) and guards it", async () => {
    const g = await governedProject(operator, ['keys']);
    const id = expectQueued(await operator.post(`/v1/keys/${g.approver.id}/revoke`));
    expect((await operator.get(`/v1/approvals/${id}`)).body).toMatchObject({ project_id: g.projectId, params: { key_id: g.approver.id } });
  });

  it('replays an Idempotency-Key: the same approval, queued once', async () => {
    const g = await governedProject(operator, ['keys']);
    const api = as(g.requester.secret);
    const body = { project_id: g.projectId, name: 'idem', scopes: ['usage:read'] };
    const first = expectQueued(await api.post('/v1/keys', body, { headers: { 'idempotency-key': 'k1' } }));
    const again = await api.post('/v1/keys', body, { headers: { 'idempotency-key': 'k1' } });
    expect(expectQueued(again)).toBe(first);
    expect((await operator.get('/v1/approvals', { query: { project_id: g.projectId } })).body.data).toHaveLength(1);
  });

  it('guards a change of a non-empty policy, also for GraphQL, and accepts retention and pii', async () => {
    const g = await governedProject(operator, ['retention', 'pii']);
    expect((await operator.get(`/v1/projects/${g.projectId}/governance`)).body).toMatchObject({ object: 'svc.governance', dual_control: ['retention', 'pii'] });
    const res = await gql('mutation($p: ID!) { setGovernancePolicy(projectId: $p, dualControl: []) { dualControl } }', { p: g.projectId }, { key: g.requester.secret });
    const id = expectGqlQueued(res, 'setGovernancePolicy');
    const approved = await gql('mutation($id: ID!) { approveApproval(id: $id) { status } }', { id }, { key: g.approver.secret });
    expect(approved.body.data.approveApproval.status).toBe('approved');
    const now = await gql('query($p: ID!) { governancePolicy(projectId: $p) { dualControl } }', { p: g.projectId }, { key: g.requester.secret });
    expect(now.body.data.governancePolicy.dualControl).toEqual([]);
    // Empty again: the next change is not guarded.
    expect((await as(g.requester.secret).put(`/v1/projects/${g.projectId}/governance`, { dual_control: ['keys'] })).status).toBe(200);
  });

  it('refuses an unknown resource naming the list (as scopes), and a missing list', async () => {
    const { projectId } = await seedProject(operator);
    expectError(await operator.put(`/v1/projects/${projectId}/governance`, { dual_control: ['keys', 'nope'] }), 400, 'invalid_request', 'dual_control');
    expectError(await operator.put(`/v1/projects/${projectId}/governance`, {}), 400, 'invalid_request', 'dual_control');
    const res = await gql('mutation($p: ID!) { setGovernancePolicy(projectId: $p, dualControl: ["nope"]) { dualControl } }', { p: projectId });
    expectGqlError(res, 'invalid_request', { param: 'dual_control' });
  });
});
