import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { expectHiddenFrom, expectScopeRequired } from '../helpers/security.ts';
import { expectGqlError, gqlClient, type Gql } from '../graphql/gql.ts';
import { expectQueued, governedProject } from '../governance/support.ts';

// POST /v1/keys/{key_id} and GraphQL updateKey (beyond the contract: docs/DECISIONS.md).

let t: TestApp;
let operator: Client;
let gql: Gql;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(() => t.close());

const now = () => Math.floor(t.clock.now() / 1000);

async function newKey(projectId: string, body: Record<string, unknown> = {}, api = operator) {
  const res = await api.post('/v1/keys', { project_id: projectId, name: `k-${Math.random().toString(36).slice(2, 8)}`, scopes: ['usage:read'], ...body });
  expect(res.status, res.raw).toBe(200);
  return res.body as { id: string; secret: string; name: string };
}

const audits = (keyId: string) => t.deps.db.auditEvent.findMany({ where: { targetId: keyId, action: 'key.update' }, orderBy: { id: 'asc' } });

describe('POST /v1/keys/{key_id}', () => {
  it('changes the fields given, keeps the others, and audits key.update with before and after', async () => {
    const { projectId, secret } = await seedProject(operator);
    const admin = client(t.app, secret);
    const key = await newKey(projectId, { budget_usd: 5, scopes: ['usage:read'] }, admin);
    const expiresAt = now() + 86_400;
    const res = await admin.post(`/v1/keys/${key.id}`, { name: 'renamed', budget_usd: 12.5, expires_at: expiresAt });
    expect(res.status, res.raw).toBe(200);
    expect(res.body).toMatchObject({
      id: key.id,
      object: 'svc.api_key',
      name: 'renamed',
      scopes: ['usage:read'],
      status: 'active',
      budget_usd: 12.5,
      expires_at: expiresAt,
      secret: `svc_sk_...${key.secret.slice(-4)}`,
    });
    expect(res.raw).not.toContain(key.secret);
    expect((await admin.get(`/v1/keys/${key.id}`)).body).toMatchObject({ name: 'renamed', budget_usd: 12.5, expires_at: expiresAt });

    const [audit] = await audits(key.id);
    expect(audit).toMatchObject({
      projectId,
      action: 'key.update',
      data: { before: { name: key.name, budget_usd: 5, expires_at: null }, after: { name: 'renamed', budget_usd: 12.5, expires_at: expiresAt } },
    });

    // Only budget_usd: the name and expiry stay; null clears.
    const cleared = await admin.post(`/v1/keys/${key.id}`, { budget_usd: null, expires_at: null });
    expect(cleared.body).toMatchObject({ name: 'renamed', budget_usd: null, expires_at: null });
  });

  it('changes nothing and audits nothing when the values are the same or the body is empty', async () => {
    const { projectId } = await seedProject(operator);
    const key = await newKey(projectId, { budget_usd: 3 });
    expect((await operator.post(`/v1/keys/${key.id}`, { name: key.name, budget_usd: 3 })).status).toBe(200);
    expect((await operator.post(`/v1/keys/${key.id}`, {})).status).toBe(200);
    expect((await operator.post(`/v1/keys/${key.id}`)).status).toBe(200);
    expect(await audits(key.id)).toHaveLength(0);
  });

  it('applies a new expiry at once: a key updated to expire soon stops authenticating when it passes', async () => {
    const { projectId } = await seedProject(operator);
    const key = await newKey(projectId, { scopes: ['keys:manage'] });
    const own = client(t.app, key.secret);
    expect((await own.get('/v1/keys')).status).toBe(200);
    expect((await operator.post(`/v1/keys/${key.id}`, { expires_at: now() + 60 })).status).toBe(200);
    t.clock.advance(61_000);
    expectError(await own.get('/v1/keys'), 401, 'invalid_api_key');
    expect((await operator.get(`/v1/keys/${key.id}`)).body.status).toBe('expired');
    // An expired key may get a later expiry back.
    const revived = await operator.post(`/v1/keys/${key.id}`, { expires_at: now() + 3600 });
    expect(revived.body.status).toBe('active');
    expect((await own.get('/v1/keys')).status).toBe(200);
  });

  it('applies a new budget at once: a key lowered to 0 gets 429 budget_exceeded on inference', async () => {
    const { projectId } = await seedProject(operator);
    const key = await newKey(projectId, { scopes: ['inference:write'] });
    const own = client(t.app, key.secret);
    const infer = () => own.post('/v1/inference', { model: 'mock-1', project_id: projectId, messages: [{ role: 'user', content: 'hi' }] });
    const first = await infer();
    expect(first.status, first.raw).toBe(200);
    expect((await operator.post(`/v1/keys/${key.id}`, { budget_usd: 0 })).status).toBe(200);
    expectError(await infer(), 429, 'budget_exceeded');
  });

  it('narrows and widens a key\'s models (CONTRACT §22) within the caller\'s own', async () => {
    const { projectId } = await seedProject(operator);
    const key = await newKey(projectId, { scopes: ['inference:write'] });
    const own = client(t.app, key.secret);
    const infer = () => own.post('/v1/inference', { model: 'mock-1', project_id: projectId, messages: [{ role: 'user', content: 'hi' }] });
    expect((await infer()).status).toBe(200);
    const narrowed = await operator.post(`/v1/keys/${key.id}`, { models: ['other-model'] });
    expect(narrowed.body.models).toEqual(['other-model']);
    expectError(await infer(), 403, 'insufficient_scope', 'model');
    expect((await operator.post(`/v1/keys/${key.id}`, { models: null })).body.models).toBeNull();
    expect((await infer()).status).toBe(200);

    const limited = await newKey(projectId, { scopes: ['keys:manage', 'inference:write'], models: ['mock-1'] });
    const caller = client(t.app, limited.secret);
    const child = await newKey(projectId, { scopes: ['inference:write'], models: ['mock-1'] }, caller);
    expectError(await caller.post(`/v1/keys/${child.id}`, { models: ['mock-1', 'gpt-x'] }), 403, 'insufficient_scope', 'models');
    expectError(await caller.post(`/v1/keys/${child.id}`, { models: null }), 403, 'insufficient_scope', 'models');
    expectError(await operator.post(`/v1/keys/${child.id}`, { models: ['bad entry'] }), 400, 'invalid_request', 'models');
  });

  it('refuses bad values with 400 invalid_request naming the field', async () => {
    const { projectId } = await seedProject(operator);
    const key = await newKey(projectId);
    expectError(await operator.post(`/v1/keys/${key.id}`, { name: '' }), 400, 'invalid_request', 'name');
    expectError(await operator.post(`/v1/keys/${key.id}`, { budget_usd: -1 }), 400, 'invalid_request', 'budget_usd');
    expectError(await operator.post(`/v1/keys/${key.id}`, { expires_at: now() - 1 }), 400, 'invalid_request', 'expires_at');
    expectError(await operator.post(`/v1/keys/${key.id}`, { mcp_tools: ['nope'] }), 400, 'invalid_request', 'mcp_tools');
    expectError(await operator.post(`/v1/keys/${key.id}`, { scopes: ['keys:manage'] }), 400, 'invalid_request', 'scopes');
    expect(await audits(key.id)).toHaveLength(0);
  });

  it('refuses a revoked key with 400 invalid_request param key_id', async () => {
    const { projectId } = await seedProject(operator);
    const key = await newKey(projectId);
    await operator.post(`/v1/keys/${key.id}/revoke`);
    expectError(await operator.post(`/v1/keys/${key.id}`, { name: 'again' }), 400, 'invalid_request', 'key_id');
  });

  it('refuses a name another active key of the project has with 409 key_name_conflict', async () => {
    const { projectId } = await seedProject(operator);
    const a = await newKey(projectId);
    const b = await newKey(projectId);
    expectError(await operator.post(`/v1/keys/${b.id}`, { name: a.name.toUpperCase() }), 409, 'key_name_conflict', 'name');
    // Its own name in another case is no conflict.
    expect((await operator.post(`/v1/keys/${b.id}`, { name: b.name.toUpperCase() })).body.name).toBe(b.name.toUpperCase());
  });

  it('refuses widening beyond the caller: 403 insufficient_scope naming what is looser', async () => {
    const { projectId } = await seedProject(operator);
    const expiresAt = now() + 3600;
    const limited = await newKey(projectId, { scopes: ['keys:manage', 'usage:read'], budget_usd: 10, expires_at: expiresAt });
    const caller = client(t.app, limited.secret);
    const child = await newKey(projectId, { scopes: ['usage:read'], budget_usd: 5, expires_at: expiresAt - 60 }, caller);
    expectError(await caller.post(`/v1/keys/${child.id}`, { budget_usd: 20 }), 403, 'insufficient_scope', 'budget_usd');
    expectError(await caller.post(`/v1/keys/${child.id}`, { budget_usd: null }), 403, 'insufficient_scope', 'budget_usd');
    expectError(await caller.post(`/v1/keys/${child.id}`, { expires_at: expiresAt + 60 }), 403, 'insufficient_scope', 'expires_at');
    expectError(await caller.post(`/v1/keys/${child.id}`, { expires_at: null }), 403, 'insufficient_scope', 'expires_at');
    // Nor may it raise its own.
    expectError(await caller.post(`/v1/keys/${limited.id}`, { budget_usd: 11 }), 403, 'insufficient_scope', 'budget_usd');
    // Within its bounds it may.
    expect((await caller.post(`/v1/keys/${child.id}`, { budget_usd: 10, name: 'child' })).body).toMatchObject({ budget_usd: 10, name: 'child' });

    // A key holding scopes the caller lacks cannot be changed by it at all.
    const admin = await newKey(projectId, { scopes: ['keys:manage', 'governance:manage'] });
    expectError(await caller.post(`/v1/keys/${admin.id}`, { name: 'mine' }), 403, 'insufficient_scope', 'key_id');
    expect(await audits(admin.id)).toHaveLength(0);
  });

  it('needs keys:manage and hides other projects\' keys', async () => {
    const a = await seedProject(operator, { scopes: ['usage:read'] });
    const b = await seedProject(operator);
    const other = await newKey(b.projectId);
    const own = await newKey(a.projectId);
    await expectScopeRequired(client(t.app, a.secret), [{ method: 'post', url: `/v1/keys/${own.id}`, body: { name: 'x' } }]);
    const manager = await newKey(a.projectId, { scopes: ['keys:manage'] });
    await expectHiddenFrom(client(t.app, manager.secret), [
      { method: 'post', url: `/v1/keys/${other.id}`, body: { name: 'x' } },
      { method: 'post', url: '/v1/keys/key_nonexistent', body: { name: 'x' } },
    ]);
    expect((await operator.get(`/v1/keys/${other.id}`)).body.name).toBe(other.name);
  });

  it('waits for a second key where the project keeps keys under dual control', async () => {
    const g = await governedProject(operator, []);
    const target = await newKey(g.projectId, { budget_usd: 1 });
    expect((await operator.put(`/v1/projects/${g.projectId}/governance`, { dual_control: ['keys'] })).status).toBe(200);
    const approvalId = expectQueued(await client(t.app, g.requester.secret).post(`/v1/keys/${target.id}`, { budget_usd: 2 }));
    expect((await operator.get(`/v1/keys/${target.id}`)).body.budget_usd).toBe(1);
    const approval = (await client(t.app, g.approver.secret).get(`/v1/approvals/${approvalId}`)).body;
    expect(approval).toMatchObject({ action: 'key.update', request: { budget_usd: 2 }, status: 'pending' });
    const decided = await client(t.app, g.approver.secret).post(`/v1/approvals/${approvalId}/approve`);
    expect(decided.body).toMatchObject({ status: 'approved', error: null });
    expect((await operator.get(`/v1/keys/${target.id}`)).body.budget_usd).toBe(2);
  });
});

describe('GraphQL updateKey', () => {
  const UPDATE = `mutation($id: ID!, $input: UpdateKeyInput!) { updateKey(id: $id, input: $input) { id name budgetUsd expiresAt status } }`;

  it('changes the key as REST does and records the same audit entry', async () => {
    const { projectId, secret } = await seedProject(operator);
    const key = await newKey(projectId);
    const expiresAt = now() + 600;
    const res = await gql(UPDATE, { id: key.id, input: { name: 'gql-name', budgetUsd: 7, expiresAt } }, { key: secret });
    expect(res.body.errors, res.raw).toBeUndefined();
    expect(res.body.data.updateKey).toEqual({ id: key.id, name: 'gql-name', budgetUsd: 7, expiresAt, status: 'active' });
    const [audit] = await audits(key.id);
    expect(audit?.data).toEqual({ before: { name: key.name, budget_usd: null, expires_at: null }, after: { name: 'gql-name', budget_usd: 7, expires_at: expiresAt } });
  });

  it('gives the same errors: invalid_request, key_name_conflict, insufficient_scope, not_found', async () => {
    const { projectId, secret } = await seedProject(operator, { scopes: ['keys:manage', 'usage:read'] });
    const a = await newKey(projectId);
    const b = await newKey(projectId);
    expectGqlError(await gql(UPDATE, { id: a.id, input: { budgetUsd: -2 } }, { key: secret }), 'invalid_request', { param: 'budget_usd', httpStatus: 400 });
    expectGqlError(await gql(UPDATE, { id: a.id, input: { name: b.name } }, { key: secret }), 'key_name_conflict', { param: 'name', httpStatus: 409 });
    const other = await seedProject(operator);
    const foreign = await newKey(other.projectId);
    expectGqlError(await gql(UPDATE, { id: foreign.id, input: { name: 'x' } }, { key: secret }), 'not_found', { httpStatus: 404 });
    const reader = await newKey(projectId, { scopes: ['usage:read'] });
    expectGqlError(await gql(UPDATE, { id: a.id, input: { name: 'x' } }, { key: reader.secret }), 'insufficient_scope', { httpStatus: 403 });
    const admin = await newKey(projectId, { scopes: ['keys:manage', 'governance:manage'] });
    expectGqlError(await gql(UPDATE, { id: admin.id, input: { name: 'x' } }, { key: secret }), 'insufficient_scope', { param: 'key_id', httpStatus: 403 });
  });
});
