import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MASTER_KEY, buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectHiddenFrom, expectScopeRequired } from '../helpers/security.ts';

let t: TestApp;
let operator: Client;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
});
afterAll(() => t.close());

describe('tenant isolation', () => {
  it("answers not_found for another project's key, project and lists", async () => {
    const mine = await seedProject(operator);
    const theirs = await seedProject(operator);
    const api = client(t.app, mine.secret);
    await expectHiddenFrom(api, [
      { method: 'get', url: `/v1/keys/${theirs.keyId}` },
      { method: 'post', url: `/v1/keys/${theirs.keyId}/rotate`, body: {} },
      { method: 'post', url: `/v1/keys/${theirs.keyId}/revoke` },
      { method: 'get', url: `/v1/keys?project_id=${theirs.projectId}` },
      { method: 'get', url: '/v1/keys', headers: { 'x-svc-project': theirs.projectId } },
      { method: 'post', url: '/v1/keys', body: { project_id: theirs.projectId, name: 'x', scopes: ['keys:manage'] } },
      { method: 'get', url: `/v1/projects/${theirs.projectId}` },
      { method: 'get', url: `/v1/audit/events?project_id=${theirs.projectId}` },
    ]);
    // Nothing changed on their side.
    const theirKey = await operator.get(`/v1/keys/${theirs.keyId}`);
    expect(theirKey.body.status).toBe('active');
    expect((await client(t.app, theirs.secret).get('/v1/keys')).status).toBe(200);
  });

  it('lists only the calling project', async () => {
    const mine = await seedProject(operator);
    await seedProject(operator);
    const keys = await client(t.app, mine.secret).get('/v1/keys');
    expect(keys.body.data.map((k: { project_id: string }) => k.project_id)).toEqual([mine.projectId]);
    const projects = await client(t.app, mine.secret).get('/v1/projects');
    expect(projects.body.data.map((p: { id: string }) => p.id)).toEqual([mine.projectId]);
  });

  it('lets the operator name any project', async () => {
    const theirs = await seedProject(operator);
    const res = await operator.get('/v1/keys', { query: { project_id: theirs.projectId } });
    expect(res.status).toBe(200);
    expect(res.headers['x-svc-key-id']).toBe('key_master');
    expect(res.headers['x-svc-project']).toBe(theirs.projectId);
    expect(res.body.data).toHaveLength(1);
  });
});

describe('scopes', () => {
  it('requires keys:manage on every key route and audit:read on the audit log', async () => {
    const { projectId, keyId } = await seedProject(operator);
    const weak = await operator.post('/v1/keys', { project_id: projectId, name: 'weak', scopes: ['inference:write'] });
    await expectScopeRequired(client(t.app, weak.body.secret), [
      { method: 'post', url: '/v1/keys', body: { project_id: projectId, name: 'x', scopes: ['inference:write'] } },
      { method: 'get', url: '/v1/keys' },
      { method: 'get', url: `/v1/keys/${keyId}` },
      { method: 'post', url: `/v1/keys/${keyId}/rotate`, body: {} },
      { method: 'post', url: `/v1/keys/${keyId}/revoke` },
      { method: 'get', url: '/v1/audit/events' },
    ]);
  });
});

describe('secrets', () => {
  it('never appear in a log line or in a response after creation', async () => {
    const { projectId } = await seedProject(operator);
    const created = await operator.post('/v1/keys', { project_id: projectId, name: 'logged', scopes: ['keys:manage'] });
    const rotated = await operator.post(`/v1/keys/${created.body.id}/rotate`, { overlap_hours: 1 });
    const secrets = [MASTER_KEY, created.body.secret, rotated.body.secret];
    const api = client(t.app, rotated.body.secret);
    const later = [
      await api.get('/v1/keys'),
      await api.get(`/v1/keys/${created.body.id}`),
      await operator.get('/v1/audit/events', { query: { project_id: projectId, limit: 100 } }),
      await operator.post(`/v1/keys/${created.body.id}/revoke`),
      // Failures are logged too: a bad key and an internal error must not leak what was sent.
      await client(t.app, created.body.secret).get('/v1/keys'),
    ];
    t.deps.log.info({ headers: { authorization: `Bearer ${created.body.secret}` } }, 'a careless line');
    for (const res of later) for (const s of secrets) expect(res.raw).not.toContain(s);
    expect(t.logs.lines.length).toBeGreaterThan(0);
    for (const s of secrets) expect(t.logs.text).not.toContain(s);
    const stored = JSON.stringify(await t.deps.db.apiKey.findMany(), (_k, v) => (typeof v === 'bigint' ? String(v) : v));
    for (const s of secrets) expect(stored).not.toContain(s);
  });
});
