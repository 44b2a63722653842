import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { uniqueName } from '../helpers/services.ts';
import { provisionGroup, provisionUser, signInBySaml, ssoEnv, testSamlIdp, testSigningKeys } from '../helpers/sso.ts';
import { expectGqlError, gqlClient, type Gql } from '../graphql/gql.ts';
import { expectGqlQueued, expectQueued, governedProject, type Governed } from '../governance/support.ts';

/**
 * Dual control (CONTRACT §15) and risk's segregation of duties (§16), attacked (issue 36): the approver never gets the
 * secret a change issues, a key minted by the requester after its request cannot approve it, a console operator's
 * request applies as that operator, and people are compared as key names are.
 */

let t: TestApp;
let operator: Client;
let gql: Gql;
let idp: ReturnType<typeof testSamlIdp>;

beforeAll(async () => {
  const keys = testSigningKeys();
  t = await buildTestApp({ env: ssoEnv(keys.cert, { SVC_EGRESS_ALLOWLIST: '127.0.0.1' }) });
  idp = testSamlIdp(keys);
  operator = client(t.app);
  gql = gqlClient(t.app);
}, 120_000);
afterAll(async () => {
  await t?.close();
});

const as = (secret: string) => client(t.app, secret);
const SECRET = /svc_sk_[0-9A-Za-z]{48}/;
const LIMITS = { requests_per_minute: 6100, tokens_per_minute: 610_000, burst: 0 };

async function newKey(api: Client, projectId: string, scopes: string[]) {
  const res = await api.post('/v1/keys', { project_id: projectId, name: uniqueName('k'), scopes });
  expect(res.status, res.raw).toBe(200);
  return { id: res.body.id as string, secret: res.body.secret as string };
}

/** The stored answer of an Idempotency-Key (opened: the store seals it), from the database or Redis. */
async function storedAnswer(scope: string, key: string): Promise<string> {
  let sealed: string | undefined;
  if (t.deps.redis) {
    const found = await t.deps.redis.keys(`*idem:{${scope}}:${key}`);
    expect(found).toHaveLength(1);
    sealed = (JSON.parse((await t.deps.redis.get(found[0]!))!) as { body?: string }).body;
  } else {
    const rows = await t.deps.db.$queryRaw<{ response_body: string | null }[]>`SELECT response_body FROM idempotency_records WHERE scope = ${scope} AND key = ${key}`;
    expect(rows).toHaveLength(1);
    sealed = rows[0]!.response_body ?? undefined;
  }
  expect(sealed).toBeTruthy();
  return t.deps.webhooks.secretBox.open(sealed!, `${scope}\n${key}`);
}

/** A governed project (risk:approve approver) with `extra` keys made by the operator before `keys` goes under dual control. */
async function keysGoverned(extra: string[][]): Promise<{ g: Governed; keys: { id: string; secret: string }[] }> {
  const g = await governedProject(operator, [], ['risk:approve']);
  const keys = [];
  for (const scopes of extra) keys.push(await newKey(operator, g.projectId, scopes));
  expect((await operator.put(`/v1/projects/${g.projectId}/governance`, { dual_control: ['keys'] })).status).toBe(200);
  return { g, keys };
}

describe('the secret an approved change issues goes to its requester only', () => {
  it('key creation: the approve answer (and its idempotency record) holds no secret; the requester claims it once (REST)', async () => {
    const { g, keys: [stranger] } = await keysGoverned([['keys:manage']]);
    const id = expectQueued(await as(g.requester.secret).post('/v1/keys', { project_id: g.projectId, name: uniqueName('new'), scopes: ['usage:read', 'keys:manage'] }));

    const idemKey = uniqueName('approve');
    const approved = await as(g.approver.secret).post(`/v1/approvals/${id}/approve`, undefined, { headers: { 'idempotency-key': idemKey } });
    expect(approved.status, approved.raw).toBe(200);
    expect(approved.body).toMatchObject({ status: 'approved', decided_by: g.approver.id, result_id: expect.stringMatching(/^key_/), secret_delivery: 'awaiting_claim' });
    expect(approved.raw).not.toMatch(SECRET);
    expect(approved.body.secret).toBeUndefined();
    // The record kept for the Idempotency-Key, and its replay, hold no secret either.
    expect(await storedAnswer(g.projectId, idemKey)).not.toMatch(SECRET);
    const replay = await as(g.approver.secret).post(`/v1/approvals/${id}/approve`, undefined, { headers: { 'idempotency-key': idemKey } });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.raw).not.toMatch(SECRET);
    // Nobody else reads it from the approval: not the approver, not the operator.
    expect((await as(g.approver.secret).get(`/v1/approvals/${id}`)).raw).not.toMatch(SECRET);
    expectError(await as(g.approver.secret).post(`/v1/approvals/${id}/claim`), 404, 'not_found', 'approval_id');
    expectError(await operator.post(`/v1/approvals/${id}/claim`), 404, 'not_found', 'approval_id');
    expectError(await as(stranger!.secret).post(`/v1/approvals/${id}/claim`), 404, 'not_found', 'approval_id');
    // The sealed copy at rest is not the secret.
    const row = await t.deps.db.approval.findUniqueOrThrow({ where: { id } });
    expect(row.resultSecret).toBeTruthy();
    expect(row.resultSecret).not.toMatch(SECRET);

    // The requester (keys:manage, no approval scope) claims it once, and it authenticates as the new key.
    const claimed = await as(g.requester.secret).post(`/v1/approvals/${id}/claim`);
    expect(claimed.status, claimed.raw).toBe(200);
    expect(claimed.body).toMatchObject({ id, status: 'approved', secret_delivery: 'claimed', secret_claimed_at: expect.any(Number) });
    expect(claimed.body.secret).toMatch(SECRET);
    const own = await as(claimed.body.secret).get(`/v1/keys/${approved.body.result_id}`);
    expect(own.status, own.raw).toBe(200);
    expect(own.headers['x-svc-key-id']).toBe(approved.body.result_id);
    // Once: the second claim is refused and the stored copy is gone.
    expectError(await as(g.requester.secret).post(`/v1/approvals/${id}/claim`), 400, 'invalid_request', 'approval_id');
    expect((await t.deps.db.approval.findUniqueOrThrow({ where: { id } })).resultSecret).toBeNull();
    const after = await as(g.approver.secret).get(`/v1/approvals/${id}`);
    expect(after.body).toMatchObject({ secret_delivery: 'claimed' });
    expect(after.raw).not.toMatch(SECRET);
    const audit = await operator.get('/v1/audit/events', { query: { project_id: g.projectId, action: 'approval.claim' } });
    expect(audit.body.data.map((e: any) => [e.actor_key_id, e.target_id])).toEqual([[g.requester.id, id]]);
  });

  it('key rotation: the approver gets no secret on GraphQL; the requester claims the new one once (GraphQL)', async () => {
    const { g, keys: [target] } = await keysGoverned([['usage:read']]);
    const id = expectQueued(await as(g.requester.secret).post(`/v1/keys/${target!.id}/rotate`, {}));

    const approved = await gql('mutation($id: ID!) { approveApproval(id: $id) { id status resultId secret secretDelivery } }', { id }, { key: g.approver.secret });
    expect(approved.body.errors, approved.raw).toBeUndefined();
    expect(approved.body.data.approveApproval).toEqual({ id, status: 'approved', resultId: target!.id, secret: null, secretDelivery: 'awaiting_claim' });
    expect(approved.raw).not.toMatch(SECRET);
    // The rotation is applied: the old secret no longer works.
    expect((await as(target!.secret).get('/v1/usage')).status).toBe(401);

    const CLAIM = 'mutation($id: ID!) { claimApprovalSecret(id: $id) { id secret secretDelivery } }';
    expectGqlError(await gql(CLAIM, { id }, { key: g.approver.secret }), 'not_found', { param: 'approval_id', httpStatus: 404 });
    const claimed = await gql(CLAIM, { id }, { key: g.requester.secret });
    expect(claimed.body.errors, claimed.raw).toBeUndefined();
    expect(claimed.body.data.claimApprovalSecret).toMatchObject({ id, secretDelivery: 'claimed', secret: expect.stringMatching(SECRET) });
    const secret = claimed.body.data.claimApprovalSecret.secret as string;
    const used = await as(secret).get('/v1/usage');
    expect(used.status, used.raw).toBe(200);
    expect(used.headers['x-svc-key-id']).toBe(target!.id);
    expectGqlError(await gql(CLAIM, { id }, { key: g.requester.secret }), 'invalid_request', { param: 'approval_id', httpStatus: 400 });
  });

  it('key creation approved on GraphQL and rotation approved on REST: no secret in either approve answer', async () => {
    const g = await governedProject(operator, ['keys'], ['risk:approve']);
    const created = await gql(
      'mutation($i: CreateKeyInput!) { createKey(input: $i) { key { id } secret } }',
      { i: { projectId: g.projectId, name: uniqueName('g'), scopes: ['usage:read'] } },
      { key: g.requester.secret },
    );
    const createId = expectGqlQueued(created, 'createKey');
    const approved = await gql('mutation($id: ID!) { approveApproval(id: $id) { status resultId secret } }', { id: createId }, { key: g.approver.secret });
    expect(approved.body.data.approveApproval, approved.raw).toMatchObject({ status: 'approved', secret: null });
    expect(approved.raw).not.toMatch(SECRET);
    const keyId = approved.body.data.approveApproval.resultId as string;
    const secret = (await as(g.requester.secret).post(`/v1/approvals/${createId}/claim`)).body.secret as string;
    expect((await as(secret).get('/v1/usage')).status).toBe(200);

    const rotateId = expectQueued(await as(g.requester.secret).post(`/v1/keys/${keyId}/rotate`, {}));
    const rotated = await as(g.approver.secret).post(`/v1/approvals/${rotateId}/approve`);
    expect(rotated.body, rotated.raw).toMatchObject({ status: 'approved', secret_delivery: 'awaiting_claim' });
    expect(rotated.raw).not.toMatch(SECRET);
    expect((await as(secret).get('/v1/usage')).status).toBe(401);
  });
});

describe('a webhook created under dual control', () => {
  it("its signing secret is not in the approver's answer; the requester claims it once", async () => {
    const g = await governedProject(operator, ['webhooks']);
    const id = expectQueued(await as(g.requester.secret).post('/v1/webhooks', { project_id: g.projectId, url: 'https://127.0.0.1:9/hook', events: ['key.revoked'] }));
    const approved = await as(g.approver.secret).post(`/v1/approvals/${id}/approve`);
    expect(approved.body, approved.raw).toMatchObject({ status: 'approved', result_id: expect.stringMatching(/^wh_/), secret_delivery: 'awaiting_claim' });
    expect(approved.raw).not.toMatch(/whsec_/);
    const claimed = await as(g.requester.secret).post(`/v1/approvals/${id}/claim`);
    expect(claimed.body.secret, claimed.raw).toMatch(/^whsec_/);
    expectError(await as(g.requester.secret).post(`/v1/approvals/${id}/claim`), 400, 'invalid_request', 'approval_id');
  });
});

describe('an approver key minted by the requester after its request', () => {
  /** A rate-limit change queued by the requester; the clock then moves on (what follows is after the request). */
  const queue = async (g: Governed) => {
    t.clock.advance(1000);
    const id = expectQueued(await as(g.requester.secret).put(`/v1/projects/${g.projectId}/rate-limits`, LIMITS));
    t.clock.advance(1000);
    return id;
  };

  it('is refused 409 segregation_of_duties on REST and GraphQL, directly or through a key it created', async () => {
    const g = await governedProject(operator, ['rate_limits']);
    // Created by the requester before the request: a key like any other.
    const earlier = await newKey(as(g.requester.secret), g.projectId, ['governance:manage', 'keys:manage']);
    const id = await queue(g);

    const minted = await newKey(as(g.requester.secret), g.projectId, ['governance:manage']);
    expectError(await as(minted.secret).post(`/v1/approvals/${id}/approve`), 409, 'segregation_of_duties');
    expectError(await as(minted.secret).post(`/v1/approvals/${id}/reject`, {}), 409, 'segregation_of_duties');
    const res = await gql('mutation($id: ID!) { approveApproval(id: $id) { status } }', { id }, { key: minted.secret });
    expectGqlError(res, 'segregation_of_duties', { httpStatus: 409, path: ['approveApproval'] });
    // Through a key the requester created (before the request): its child minted after the request is refused too.
    const grandchild = await newKey(as(earlier.secret), g.projectId, ['governance:manage']);
    expectError(await as(grandchild.secret).post(`/v1/approvals/${id}/approve`), 409, 'segregation_of_duties');
    expectGqlError(await gql('mutation($id: ID!) { approveApproval(id: $id) { status } }', { id }, { key: grandchild.secret }), 'segregation_of_duties', { httpStatus: 409 });
    expect((await t.deps.db.approval.findUniqueOrThrow({ where: { id } })).status).toBe('pending');

    // A key the operator created after the request is not the requester's: it approves.
    const fromOperator = await newKey(operator, g.projectId, ['governance:manage']);
    const ok = await as(fromOperator.secret).post(`/v1/approvals/${id}/approve`);
    expect(ok.body, ok.raw).toMatchObject({ status: 'approved', decided_by: fromOperator.id });
    // And the key the requester created before the request may decide another of its changes.
    const second = await queue(g);
    expect((await as(earlier.secret).post(`/v1/approvals/${second}/reject`, {})).body).toMatchObject({ status: 'rejected' });
  });

  it('refuses a key whose secret the requester rotated after the request', async () => {
    const g = await governedProject(operator, ['rate_limits']);
    const other = await newKey(operator, g.projectId, ['governance:manage']);
    const id = await queue(g);
    const rotated = await as(g.requester.secret).post(`/v1/keys/${other.id}/rotate`, {});
    expect(rotated.status, rotated.raw).toBe(200);
    expectError(await as(rotated.body.secret).post(`/v1/approvals/${id}/approve`), 409, 'segregation_of_duties');
    expectGqlError(await gql('mutation($id: ID!) { approveApproval(id: $id) { status } }', { id }, { key: rotated.body.secret }), 'segregation_of_duties', { httpStatus: 409 });
  });

  it("refuses, for the operator key's request, a key the operator created after it", async () => {
    const g = await governedProject(operator, ['rate_limits']);
    t.clock.advance(1000);
    const id = expectQueued(await operator.put(`/v1/projects/${g.projectId}/rate-limits`, LIMITS));
    t.clock.advance(1000);
    const minted = await newKey(operator, g.projectId, ['governance:manage']);
    expectError(await as(minted.secret).post(`/v1/approvals/${id}/approve`), 409, 'segregation_of_duties');
    // A key that existed before the request approves it.
    expect((await as(g.approver.secret).post(`/v1/approvals/${id}/approve`)).body).toMatchObject({ status: 'approved' });
  });
});

describe('a change requested from a console session', () => {
  it('is applied as that operator when another key approves it (REST and GraphQL), and its secret is the operator\'s to claim', async () => {
    const g = await governedProject(operator, ['rate_limits', 'keys']);
    const user = `olga.${uniqueName('o')}@example.com`;
    const opr = await provisionUser(t.app, user);
    const group = await provisionGroup(t.app, uniqueName('admins'), [opr]);
    expect((await operator.put(`/v1/operator-groups/${group}/roles`, { roles: [{ project_id: g.projectId, role: 'admin' }] })).status).toBe(200);
    const s = await signInBySaml(t.app, idp, user);
    const api = s.api.project(g.projectId);

    // REST: a rate-limit change, approved on REST.
    const queued = await api.put(`/v1/projects/${g.projectId}/rate-limits`, LIMITS);
    const id = expectQueued(queued);
    expect((await as(g.approver.secret).get(`/v1/approvals/${id}`)).body.requested_by).toBe(opr);
    const approved = await as(g.approver.secret).post(`/v1/approvals/${id}/approve`);
    expect(approved.body, approved.raw).toMatchObject({ status: 'approved', error: null, requested_by: opr });
    expect((await operator.get(`/v1/projects/${g.projectId}/rate-limits`)).body).toMatchObject(LIMITS);

    // GraphQL: a key creation requested by the session, approved on GraphQL; the operator claims the secret.
    const created = await api.gql('mutation($i: CreateKeyInput!) { createKey(input: $i) { key { id } secret } }', { i: { projectId: g.projectId, name: uniqueName('s'), scopes: ['models:read'] } });
    const createId = expectGqlQueued(created as any, 'createKey');
    const done = await gql('mutation($id: ID!) { approveApproval(id: $id) { status error resultId secret } }', { id: createId }, { key: g.approver.secret });
    expect(done.body.data.approveApproval, done.raw).toMatchObject({ status: 'approved', error: null, secret: null });
    const keyId = done.body.data.approveApproval.resultId as string;
    const key = await operator.get(`/v1/keys/${keyId}`);
    expect(key.body).toMatchObject({ id: keyId, scopes: ['models:read'], status: 'active' });
    const claimed = await api.post(`/v1/approvals/${createId}/claim`);
    expect(claimed.status, claimed.raw).toBe(200);
    expect((await as(claimed.body.secret).get('/v1/models')).status).toBe(200);
    // The audit names the operator as the actor of the applied change.
    const audit = await operator.get('/v1/audit/events', { query: { project_id: g.projectId, action: 'key.create' } });
    expect(audit.body.data.find((e: any) => e.target_id === keyId)?.actor_key_id).toBe(opr);
  });

  it('fails when the operator lost its role in the project before the approval', async () => {
    const g = await governedProject(operator, ['rate_limits']);
    const user = `pavel.${uniqueName('o')}@example.com`;
    const opr = await provisionUser(t.app, user);
    const group = await provisionGroup(t.app, uniqueName('admins'), [opr]);
    expect((await operator.put(`/v1/operator-groups/${group}/roles`, { roles: [{ project_id: g.projectId, role: 'admin' }] })).status).toBe(200);
    const s = await signInBySaml(t.app, idp, user);
    const id = expectQueued(await s.api.project(g.projectId).put(`/v1/projects/${g.projectId}/rate-limits`, LIMITS));
    expect((await operator.put(`/v1/operator-groups/${group}/roles`, { roles: [{ project_id: g.projectId, role: 'viewer' }] })).status).toBe(200);
    const res = await as(g.approver.secret).post(`/v1/approvals/${id}/approve`);
    expect(res.body, res.raw).toMatchObject({ status: 'failed', error: { code: 'insufficient_scope' } });
    expect((await operator.get(`/v1/projects/${g.projectId}/rate-limits`)).body.requests_per_minute).not.toBe(LIMITS.requests_per_minute);
  });
});

describe('risk cases compare people as key names are compared', () => {
  const CREATE = 'mutation($input: CreateRiskCaseInput!) { createRiskCase(input: $input) { id assignee reviewer } }';
  let p: { projectId: string; secret: string };
  beforeAll(async () => {
    const seeded = await seedProject(operator, { scopes: ['risk:write', 'risk:read'] });
    p = { projectId: seeded.projectId, secret: seeded.secret };
  });
  const create = (assignee: string, reviewer: string) => as(p.secret).post('/v1/risk/cases', { title: 'Vendor', assignee, reviewer });
  const createGql = (assignee: string, reviewer: string) => gql(CREATE, { input: { title: 'Vendor', assignee, reviewer } }, { key: p.secret });

  const SAME: [string, string, string][] = [
    ['composed and decomposed é', 'Zoé', 'Zoe\u0301'],
    ['full-width letters', 'alice', '\uFF41\uFF4C\uFF49\uFF43\uFF45'],
  ];
  it.each(SAME)('%s are one person: 409 segregation_of_duties (REST and GraphQL)', async (_what, a, b) => {
    expectError(await create(a, b), 409, 'segregation_of_duties', 'reviewer');
    expectGqlError(await createGql(a, b), 'segregation_of_duties', { httpStatus: 409, param: 'reviewer', path: ['createRiskCase'] });
  });

  const REFUSED: [string, string, string, string][] = [
    ['a zero-width space', 'alice', 'alice\u200b', 'reviewer'],
    ['a right-to-left override', '\u202Ealice', 'bob', 'assignee'],
    ['a Cyrillic а among Latin letters', 'alice', '\u0430lice', 'reviewer'],
    ['a Greek ο among Latin letters', 'b\u03BFb', 'alice', 'assignee'],
  ];
  it.each(REFUSED)('%s is refused: 400 invalid_request naming the field (REST and GraphQL)', async (_what, a, b, param) => {
    expectError(await create(a, b), 400, 'invalid_request', param);
    expectGqlError(await createGql(a, b), 'invalid_request', { httpStatus: 400, param });
  });

  it('an update that makes the reviewer the assignee in another form is 409; distinct people pass and are stored NFC', async () => {
    const made = await create('Zoe\u0301', 'bob');
    expect(made.status, made.raw).toBe(200);
    expect(made.body.assignee).toBe('Zo\u00e9');
    expectError(await as(p.secret).patch(`/v1/risk/cases/${made.body.id}`, { reviewer: 'ZO\u00c9' }), 409, 'segregation_of_duties', 'reviewer');
    const upd = await gql('mutation($id: ID!, $r: String) { updateRiskCase(id: $id, input: { reviewer: $r }) { id } }', { id: made.body.id, r: '\uFF3A\uFF4F\u00e9' }, { key: p.secret });
    expectGqlError(upd, 'segregation_of_duties', { httpStatus: 409, param: 'reviewer' });
    expectError(await as(p.secret).patch(`/v1/risk/cases/${made.body.id}`, { assignee: 'b\u200bob' }), 400, 'invalid_request', 'assignee');
    const ok = await as(p.secret).patch(`/v1/risk/cases/${made.body.id}`, { reviewer: 'Иван' });
    expect(ok.status, ok.raw).toBe(200);
    expect(ok.body.reviewer).toBe('Иван');
  });
});
