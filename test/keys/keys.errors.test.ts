import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';

let t: TestApp;
let operator: Client;
let projectId: string;
let admin: Client;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
  const seeded = await seedProject(operator);
  projectId = seeded.projectId;
  admin = client(t.app, seeded.secret);
});
afterAll(() => t.close());

const valid = () => ({ project_id: projectId, name: `k-${Math.random()}`, scopes: ['keys:manage'] });

describe('invalid_request names the offending param', () => {
  const cases: [string, Record<string, unknown>, string][] = [
    ['an unknown scope', { scopes: ['keys:manage', 'root:all'] }, 'scopes'],
    ['empty scopes', { scopes: [] }, 'scopes'],
    ['scopes of the wrong type', { scopes: 'keys:manage' }, 'scopes'],
    ['an empty name', { name: '' }, 'name'],
    ['a name over 100 characters', { name: 'x'.repeat(101) }, 'name'],
    ['a name of the wrong type', { name: 42 }, 'name'],
    ['expires_at in the past', { expires_at: 1_000_000 }, 'expires_at'],
    ['expires_at not an integer', { expires_at: 'tomorrow' }, 'expires_at'],
    ['a negative budget_usd', { budget_usd: -1 }, 'budget_usd'],
    ['budget_usd as a string', { budget_usd: '5' }, 'budget_usd'],
    ['a budget_usd under a micro-dollar (it would round to a budget of 0)', { budget_usd: 0.0000004 }, 'budget_usd'],
    ['an unknown field', { colour: 'blue' }, 'colour'],
  ];
  for (const [what, patch, param] of cases) {
    it(`refuses ${what}`, async () => {
      const before = await t.deps.db.apiKey.count();
      const res = await admin.post('/v1/keys', { ...valid(), ...patch });
      expectError(res, 400, 'invalid_request', param);
      expect(await t.deps.db.apiKey.count()).toBe(before);
    });
  }

  it('refuses a missing name', async () => {
    const { name: _omit, ...rest } = valid();
    expectError(await admin.post('/v1/keys', rest), 400, 'invalid_request', 'name');
  });

  it('refuses overlap_hours out of range', async () => {
    const key = await admin.post('/v1/keys', valid());
    expectError(await admin.post(`/v1/keys/${key.body.id}/rotate`, { overlap_hours: 169 }), 400, 'invalid_request', 'overlap_hours');
    expectError(await admin.post(`/v1/keys/${key.body.id}/rotate`, { overlap_hours: -1 }), 400, 'invalid_request', 'overlap_hours');
    expectError(await admin.post(`/v1/keys/${key.body.id}/rotate`, { overlap_hours: 1.5 }), 400, 'invalid_request', 'overlap_hours');
  });

  it('refuses to rotate a revoked key', async () => {
    const key = await admin.post('/v1/keys', valid());
    await admin.post(`/v1/keys/${key.body.id}/revoke`);
    expectError(await admin.post(`/v1/keys/${key.body.id}/rotate`), 400, 'invalid_request', 'key_id');
  });
});

describe('missing_project_id', () => {
  it('is returned when neither the body nor the header names a project', async () => {
    const { project_id: _omit, ...rest } = valid();
    expectError(await admin.post('/v1/keys', rest), 400, 'missing_project_id', 'project_id');
    expectError(await operator.post('/v1/keys', rest), 400, 'missing_project_id', 'project_id');
  });
});

describe('key_name_conflict', () => {
  it('is returned for a name already used in the project, and stores nothing', async () => {
    const body = valid();
    expect((await admin.post('/v1/keys', body)).status).toBe(200);
    const keys = await t.deps.db.apiKey.count();
    const audits = await t.deps.db.auditEvent.count({ where: { action: 'key.create' } });
    expectError(await admin.post('/v1/keys', body), 409, 'key_name_conflict', 'name');
    expect(await t.deps.db.apiKey.count()).toBe(keys);
    expect(await t.deps.db.auditEvent.count({ where: { action: 'key.create' } })).toBe(audits);
  });

  it('allows the same name in another project', async () => {
    const body = valid();
    expect((await admin.post('/v1/keys', body)).status).toBe(200);
    const other = await seedProject(operator);
    expect((await operator.post('/v1/keys', { ...body, project_id: other.projectId })).status).toBe(200);
  });
});

describe('invalid_api_key', () => {
  const cases: [string, Record<string, string>][] = [
    ['no Authorization header', {}],
    ['a non-Bearer scheme', { authorization: 'Basic dXNlcjpwYXNz' }],
    ['a key without the svc_sk_ prefix', { authorization: 'Bearer sk_live_abc' }],
    ['an unknown key', { authorization: 'Bearer svc_sk_000000000000000000000000000000000000000000000000' }],
    ['an empty Bearer', { authorization: 'Bearer ' }],
  ];
  for (const [what, headers] of cases) {
    it(`is returned for ${what}`, async () => {
      const res = await client(t.app, '').get('/v1/keys', { key: null, headers });
      expectError(res, 401, 'invalid_api_key', null);
      expect(res.headers['x-svc-key-id']).toBeUndefined();
    });
  }
});

describe('insufficient_scope', () => {
  it('is returned when the key lacks the route scope, with identity headers', async () => {
    const created = await admin.post('/v1/keys', { ...valid(), scopes: ['keys:manage'] });
    const weak = await operator.post('/v1/keys', { ...valid(), scopes: ['usage:read'] });
    const res = await client(t.app, weak.body.secret).get(`/v1/keys/${created.body.id}`);
    expectError(res, 403, 'insufficient_scope', null);
    expect(res.headers['x-svc-key-id']).toBe(weak.body.id);
    expect(res.headers['x-svc-scopes']).toBe('usage:read');
  });

  it('is returned when a key asks for scopes it does not hold, and stores nothing', async () => {
    const limited = await operator.post('/v1/keys', { ...valid(), scopes: ['keys:manage'] });
    const before = await t.deps.db.apiKey.count();
    const res = await client(t.app, limited.body.secret).post('/v1/keys', { ...valid(), scopes: ['keys:manage', 'governance:manage'] });
    expectError(res, 403, 'insufficient_scope', 'scopes');
    expect(await t.deps.db.apiKey.count()).toBe(before);
  });

  it('is returned when a project key tries an operator action', async () => {
    expectError(await admin.post('/v1/projects', { name: 'nope' }), 403, 'insufficient_scope', null);
    expectError(await admin.post(`/v1/projects/${projectId}/archive`), 403, 'insufficient_scope', null);
  });
});

describe('not_found', () => {
  it('is returned when the operator names a project the key is not in (X-Svc-Project)', async () => {
    const key = await admin.post('/v1/keys', valid());
    const other = await seedProject(operator);
    const headers = { 'x-svc-project': other.projectId };
    expectError(await operator.post(`/v1/keys/${key.body.id}/revoke`, undefined, { headers }), 404, 'not_found', 'key_id');
    expectError(await operator.post(`/v1/keys/${key.body.id}/rotate`, {}, { headers }), 404, 'not_found', 'key_id');
    const own = await operator.post(`/v1/keys/${key.body.id}/revoke`, undefined, { headers: { 'x-svc-project': projectId } });
    expect(own.status).toBe(200);
  });

  it('is returned for an unknown key id', async () => {
    expectError(await admin.get('/v1/keys/key_00000000000000000000000000'), 404, 'not_found', 'key_id');
    expectError(await admin.post('/v1/keys/key_00000000000000000000000000/revoke'), 404, 'not_found', 'key_id');
    expectError(await admin.post('/v1/keys/key_00000000000000000000000000/rotate'), 404, 'not_found', 'key_id');
  });
});
