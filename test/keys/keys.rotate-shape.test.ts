import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type TestApp } from '../helpers/app.ts';

// The rotation's answer is the key object plus previous_secret_expires_at, whatever optional fields the key carries
// (the response schema's serializer writes optional fields last: a key with mcp_tools once answered 500 here).
describe('POST /v1/keys/{id}/rotate on a key with optional fields', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  }, 120_000);
  afterAll(() => t?.close());

  it('answers the key with its mcp_tools, models and previous_secret_expires_at', async () => {
    const api = client(t.app);
    const s = await seedProject(api, { scopes: ['keys:manage', 'mcp:use'] });
    const created = await api.post('/v1/keys', { project_id: s.projectId, name: 'tools', scopes: ['mcp:use'], mcp_tools: ['srv/*'], models: ['mock-1'] });
    expect(created.status).toBe(200);
    const rotated = await api.post(`/v1/keys/${created.body.id}/rotate`, { overlap_hours: 1 });
    expect(rotated.status).toBe(200);
    expect(rotated.body).toMatchObject({ id: created.body.id, mcp_tools: ['srv/*'], models: ['mock-1'], status: 'active' });
    expect(rotated.body.secret).toMatch(/^svc_sk_/);
    expect(rotated.body.secret).not.toBe(created.body.secret);
    expect(rotated.body.previous_secret_expires_at).toBeGreaterThan(created.body.created_at);
  });
});
