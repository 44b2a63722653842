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

describe('audit log', () => {
  it('records key.create, key.list, key.rotate and key.revoke with actor, target and request id', async () => {
    const { projectId, keyId, secret } = await seedProject(operator);
    const api = client(t.app, secret);
    const listed = await api.get('/v1/keys');
    const rotated = await api.post(`/v1/keys/${keyId}/rotate`, { overlap_hours: 1 });
    const revoked = await client(t.app, rotated.body.secret).post(`/v1/keys/${keyId}/revoke`);
    expect(revoked.status).toBe(200);

    const res = await operator.get('/v1/audit/events', { query: { project_id: projectId } });
    expect(res.status).toBe(200);
    expect(res.body.url).toBe('/v1/audit/events');
    const actions = res.body.data.map((e: { action: string }) => e.action);
    expect(actions).toEqual(['key.revoke', 'key.rotate', 'key.list', 'key.create', 'project.create']);
    const list = res.body.data.find((e: { action: string }) => e.action === 'key.list');
    expect(list).toMatchObject({
      object: 'svc.audit_event',
      project_id: projectId,
      actor_key_id: keyId,
      target_id: null,
      request_id: listed.headers['x-svc-request-id'],
    });
    expect(list.id).toMatch(/^aud_/);
    const rotate = res.body.data.find((e: { action: string }) => e.action === 'key.rotate');
    expect(rotate.target_id).toBe(keyId);
    expect(rotate.request_id).toBe(rotated.headers['x-svc-request-id']);
    const create = res.body.data.find((e: { action: string }) => e.action === 'key.create');
    expect(create.actor_key_id).toBe('key_master');
  });

  it('filters by action', async () => {
    const { projectId } = await seedProject(operator);
    const res = await operator.get('/v1/audit/events', { query: { project_id: projectId, action: 'key.create' } });
    expect(res.body.data.map((e: { action: string }) => e.action)).toEqual(['key.create']);
  });

  it('refuses an empty action filter rather than matching nothing', async () => {
    const { projectId } = await seedProject(operator);
    expectError(await operator.get('/v1/audit/events', { query: { project_id: projectId, action: '' } }), 400, 'invalid_request', 'action');
  });
});
