import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';

let t: TestApp;
let operator: Client;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
});
afterAll(() => t.close());

describe('POST /v1/keys', () => {
  it('creates a key and returns its full secret once', async () => {
    const { projectId, secret: adminSecret } = await seedProject(operator);
    const admin = client(t.app, adminSecret);
    const res = await admin.post('/v1/keys', { project_id: projectId, name: 'ci', scopes: ['keys:manage'], budget_usd: 12.5 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      object: 'svc.api_key',
      prefix: 'svc_sk_',
      name: 'ci',
      scopes: ['keys:manage'],
      project_id: projectId,
      status: 'active',
      budget_usd: 12.5,
      expires_at: null,
      last_used_at: null,
    });
    expect(res.body.id).toMatch(/^key_[0-9a-z]{26}$/);
    expect(res.body.secret).toMatch(/^svc_sk_[0-9A-Za-z]{48}$/);
    expect(res.body.created_at).toBe(Math.floor(t.clock.now() / 1000));

    const again = await admin.get(`/v1/keys/${res.body.id}`);
    expect(again.status).toBe(200);
    expect(again.body.secret).toBe(`svc_sk_...${res.body.secret.slice(-4)}`);
    expect(again.raw).not.toContain(res.body.secret);
  });

  it('takes the project from the X-Svc-Project header when the body has none', async () => {
    const { projectId } = await seedProject(operator);
    const res = await operator.post('/v1/keys', { name: 'by-header', scopes: ['usage:read'] }, { headers: { 'x-svc-project': projectId } });
    expect(res.status).toBe(200);
    expect(res.body.project_id).toBe(projectId);
    expect(res.headers['x-svc-project']).toBe(projectId);
  });

  it('refuses a body project_id and an X-Svc-Project header that name different projects', async () => {
    const a = await seedProject(operator);
    const b = await seedProject(operator);
    const headers = { headers: { 'x-svc-project': b.projectId } };
    expectError(await operator.post('/v1/keys', { project_id: a.projectId, name: 'both', scopes: ['usage:read'] }, headers), 400, 'invalid_request', 'project_id');
    expectError(await operator.get(`/v1/keys?project_id=${a.projectId}`, headers), 400, 'invalid_request', 'project_id');
    expect(await t.deps.db.apiKey.count({ where: { name: 'both' } })).toBe(0);
    // The same project in both is fine.
    const same = await operator.post('/v1/keys', { project_id: a.projectId, name: 'both', scopes: ['usage:read'] }, { headers: { 'x-svc-project': a.projectId } });
    expect(same.status).toBe(200);
  });

  it('counts a name in characters: 100 emoji are accepted, 101 are not', async () => {
    const { projectId } = await seedProject(operator);
    const ok = await operator.post('/v1/keys', { project_id: projectId, name: '🔑'.repeat(100), scopes: ['usage:read'] });
    expect(ok.status).toBe(200);
    expect(ok.body.name).toBe('🔑'.repeat(100));
    expectError(await operator.post('/v1/keys', { project_id: projectId, name: '🔑'.repeat(101), scopes: ['usage:read'] }), 400, 'invalid_request', 'name');
  });

  it('authenticates the new secret at once', async () => {
    const { projectId } = await seedProject(operator);
    const created = await operator.post('/v1/keys', { project_id: projectId, name: 'fresh', scopes: ['keys:manage', 'audit:read'] });
    const res = await client(t.app, created.body.secret).get('/v1/keys');
    expect(res.status).toBe(200);
    expect(res.headers['x-svc-key-id']).toBe(created.body.id);
    expect(res.headers['x-svc-project']).toBe(projectId);
    expect(res.headers['x-svc-scopes']).toBe('keys:manage audit:read');
  });
});

describe('GET /v1/keys', () => {
  it('lists the project keys newest first with redacted secrets and the list headers', async () => {
    const { projectId, secret } = await seedProject(operator);
    const api = client(t.app, secret);
    for (const name of ['a', 'b', 'c']) await api.post('/v1/keys', { project_id: projectId, name, scopes: ['keys:manage'] });
    const res = await api.get('/v1/keys', { query: { limit: 2 } });
    expect(res.status).toBe(200);
    expect(res.body.object).toBe('list');
    expect(res.body.url).toBe('/v1/keys');
    expect(res.body.has_more).toBe(true);
    expect(res.body.data.map((k: { name: string }) => k.name)).toEqual(['c', 'b']);
    for (const k of res.body.data) expect(k.secret).toMatch(/^svc_sk_\.\.\.[0-9A-Za-z]{4}$/);
    expect(res.headers['x-svc-page-limit']).toBe('2');
    expect(res.headers['x-svc-has-more']).toBe('true');
    expect(res.headers['x-svc-request-id']).toMatch(/^req_/);
  });

  it('defaults to 20 per page', async () => {
    const { secret } = await seedProject(operator);
    const res = await client(t.app, secret).get('/v1/keys');
    expect(res.headers['x-svc-page-limit']).toBe('20');
    expect(res.body.has_more).toBe(false);
    expect(res.body.data).toHaveLength(1);
  });
});

describe('project_id on the routes of one key (CONTRACT §2, §3)', () => {
  it('is checked in the query and the body like X-Svc-Project: another project is 404, and nothing changes', async () => {
    const a = await seedProject(operator);
    const b = await seedProject(operator);
    const keyA = client(t.app, a.secret);
    expectError(await keyA.get(`/v1/keys/${a.keyId}?project_id=${b.projectId}`), 404, 'not_found', 'project_id');
    expectError(await keyA.post(`/v1/keys/${a.keyId}/revoke?project_id=${b.projectId}`), 404, 'not_found', 'project_id');
    expectError(await keyA.post(`/v1/keys/${a.keyId}/revoke`, { project_id: b.projectId }), 404, 'not_found', 'project_id');
    expectError(await keyA.post(`/v1/keys/${a.keyId}/rotate`, { project_id: b.projectId }), 404, 'not_found', 'project_id');
    expect((await t.deps.db.apiKey.findUniqueOrThrow({ where: { id: a.keyId } })).status).toBe('active');
    expect((await keyA.get(`/v1/keys/${a.keyId}?project_id=${a.projectId}`)).status).toBe(200);

    // The operator naming a project the key is not in, or no project at all.
    expectError(await operator.get(`/v1/keys/${a.keyId}?project_id=${b.projectId}`), 404, 'not_found', 'key_id');
    expectError(await operator.get(`/v1/keys/${a.keyId}?project_id=prj_00000000000000000000000000`), 404, 'not_found', 'project_id');
    // Query and body naming different projects.
    expectError(await operator.post(`/v1/keys/${a.keyId}/revoke?project_id=${a.projectId}`, { project_id: b.projectId }), 400, 'invalid_request', 'project_id');
    expect((await t.deps.db.apiKey.findUniqueOrThrow({ where: { id: a.keyId } })).status).toBe('active');
  });

  it('is accepted in the body of a rotate', async () => {
    const { projectId, keyId } = await seedProject(operator);
    const rotated = await operator.post(`/v1/keys/${keyId}/rotate`, { project_id: projectId, overlap_hours: 1 });
    expect(rotated.status).toBe(200);
    expect(rotated.headers['x-svc-project']).toBe(projectId);
  });
});

describe('rotation', () => {
  it('is refused for a key holding scopes the caller does not hold (its new secret would grant them)', async () => {
    const { projectId, keyId: adminId, secret: adminSecret } = await seedProject(operator);
    const narrow = await operator.post('/v1/keys', { project_id: projectId, name: 'narrow', scopes: ['keys:manage'] });
    const res = await client(t.app, narrow.body.secret).post(`/v1/keys/${adminId}/rotate`, { overlap_hours: 0 });
    expectError(res, 403, 'insufficient_scope', 'key_id');
    expect(res.body.error.message).toContain('governance:manage');
    expect(res.raw).not.toMatch(/svc_sk_[0-9A-Za-z]{40}/);
    // Nothing changed: the admin's secret still works, and nothing was audited.
    expect((await client(t.app, adminSecret).get('/v1/keys')).status).toBe(200);
    expect(await t.deps.db.auditEvent.count({ where: { targetId: adminId, action: 'key.rotate' } })).toBe(0);
    // A key with the same scopes or fewer can be rotated by it.
    const peer = await operator.post('/v1/keys', { project_id: projectId, name: 'peer', scopes: ['keys:manage'] });
    expect((await client(t.app, narrow.body.secret).post(`/v1/keys/${peer.body.id}/rotate`)).status).toBe(200);
  });

  it('keeps both secrets valid during the overlap, then only the new one', async () => {
    const { projectId } = await seedProject(operator);
    const created = await operator.post('/v1/keys', { project_id: projectId, name: 'rotating', scopes: ['keys:manage'] });
    const oldSecret = created.body.secret;
    const rotated = await client(t.app, oldSecret).post(`/v1/keys/${created.body.id}/rotate`, { overlap_hours: 24 });
    expect(rotated.status).toBe(200);
    expect(rotated.body.id).toBe(created.body.id);
    expect(rotated.body.secret).toMatch(/^svc_sk_/);
    expect(rotated.body.secret).not.toBe(oldSecret);
    expect(rotated.body.previous_secret_expires_at).toBe(Math.floor(t.clock.now() / 1000) + 24 * 3600);
    const newSecret = rotated.body.secret;

    t.clock.advanceHours(23);
    expect((await client(t.app, oldSecret).get(`/v1/keys/${created.body.id}`)).status).toBe(200);
    expect((await client(t.app, newSecret).get(`/v1/keys/${created.body.id}`)).status).toBe(200);

    t.clock.advanceHours(1);
    const late = await client(t.app, oldSecret).get(`/v1/keys/${created.body.id}`);
    expect(late.status).toBe(401);
    expect(late.body.error.code).toBe('invalid_api_key');
    expect((await client(t.app, newSecret).get(`/v1/keys/${created.body.id}`)).status).toBe(200);
  });

  it('revokes the previous secret at once when overlap_hours is 0 (the default)', async () => {
    const { projectId } = await seedProject(operator);
    const created = await operator.post('/v1/keys', { project_id: projectId, name: 'no-overlap', scopes: ['keys:manage'] });
    const rotated = await operator.post(`/v1/keys/${created.body.id}/rotate`);
    expect(rotated.status).toBe(200);
    expect(rotated.body.previous_secret_expires_at).toBe(Math.floor(t.clock.now() / 1000));
    expect((await client(t.app, created.body.secret).get('/v1/keys')).status).toBe(401);
    expect((await client(t.app, rotated.body.secret).get('/v1/keys')).status).toBe(200);
  });

  it('audits key.rotate and emits key.rotated', async () => {
    const { projectId } = await seedProject(operator);
    const created = await operator.post('/v1/keys', { project_id: projectId, name: 'audited', scopes: ['keys:manage'] });
    const rotated = await operator.post(`/v1/keys/${created.body.id}/rotate`, { overlap_hours: 2 });
    const audit = await t.deps.db.auditEvent.findMany({ where: { targetId: created.body.id, action: 'key.rotate' } });
    expect(audit).toHaveLength(1);
    expect(audit[0]!.data).toMatchObject({ overlap_hours: 2 });
    const events = await t.deps.db.event.findMany({ where: { projectId, type: 'key.rotated' } });
    expect(events.map((e) => e.data)).toEqual([
      { key_id: created.body.id, previous_secret_expires_at: rotated.body.previous_secret_expires_at },
    ]);
  });
});

describe('revocation', () => {
  it('answers 401 on the very next request and returns the same key when revoked twice', async () => {
    const { projectId } = await seedProject(operator);
    const created = await operator.post('/v1/keys', { project_id: projectId, name: 'doomed', scopes: ['keys:manage'] });
    const api = client(t.app, created.body.secret);
    expect((await api.get('/v1/keys')).status).toBe(200);

    const revoked = await operator.post(`/v1/keys/${created.body.id}/revoke`);
    expect(revoked.status).toBe(200);
    expect(revoked.body.status).toBe('revoked');
    expect(revoked.body.revoked_at).toBe(Math.floor(t.clock.now() / 1000));

    const next = await api.get('/v1/keys');
    expect(next.status).toBe(401);
    expect(next.body.error.code).toBe('invalid_api_key');

    const twice = await operator.post(`/v1/keys/${created.body.id}/revoke`);
    expect(twice.status).toBe(200);
    expect(twice.body).toEqual(revoked.body);
    expect(await t.deps.db.auditEvent.count({ where: { targetId: created.body.id, action: 'key.revoke' } })).toBe(1);
    expect(await t.deps.db.event.count({ where: { projectId, type: 'key.revoked' } })).toBe(1);
  });

  it('is seen at once by a second app instance sharing the database', async () => {
    const { projectId } = await seedProject(operator);
    const created = await operator.post('/v1/keys', { project_id: projectId, name: 'shared', scopes: ['keys:manage'] });
    const second = await buildTestApp({
      database: { database: t.deps.database, url: t.config.databaseUrl, drop: async () => {} },
      clock: t.clock,
      redisPrefix: t.config.redisPrefix,
    });
    try {
      const onSecond = client(second.app, created.body.secret);
      // Twice: the second answer comes from the second instance's key cache.
      expect((await onSecond.get('/v1/keys')).status).toBe(200);
      expect((await onSecond.get('/v1/keys')).status).toBe(200);
      expect((await operator.post(`/v1/keys/${created.body.id}/revoke`)).status).toBe(200);
      // The revoking instance evicts before answering; the other hears it over the bus (Redis pub/sub) within 100 ms.
      const started = Date.now();
      let res = await onSecond.get('/v1/keys');
      while (res.status !== 401 && Date.now() - started < 100) res = await onSecond.get('/v1/keys');
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('invalid_api_key');
      expect(Date.now() - started).toBeLessThan(100);
    } finally {
      await second.close();
    }
  });

  it('frees the name for a new key', async () => {
    const { projectId } = await seedProject(operator);
    const first = await operator.post('/v1/keys', { project_id: projectId, name: 'reused', scopes: ['keys:manage'] });
    await operator.post(`/v1/keys/${first.body.id}/revoke`);
    const second = await operator.post('/v1/keys', { project_id: projectId, name: 'reused', scopes: ['keys:manage'] });
    expect(second.status).toBe(200);
  });
});

describe('expiry', () => {
  it('answers 401 once expires_at passes and shows status expired', async () => {
    const { projectId } = await seedProject(operator);
    const expiresAt = Math.floor(t.clock.now() / 1000) + 3600;
    const created = await operator.post('/v1/keys', { project_id: projectId, name: 'short', scopes: ['keys:manage'], expires_at: expiresAt });
    expect(created.body.expires_at).toBe(expiresAt);
    expect((await client(t.app, created.body.secret).get('/v1/keys')).status).toBe(200);
    t.clock.advanceHours(1);
    const res = await client(t.app, created.body.secret).get('/v1/keys');
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('invalid_api_key');
    const shown = await operator.get(`/v1/keys/${created.body.id}`);
    expect(shown.body.status).toBe('expired');
  });
});
