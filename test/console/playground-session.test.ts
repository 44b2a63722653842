import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { provisionGroup, provisionUser, sessionClient, signInBySaml, ssoEnv, testSamlIdp, testSigningKeys } from '../helpers/sso.ts';

// The Playground and the Models screen's test as an SSO console session: POST /v1/chat/completions with the session
// cookie, its CSRF token and X-Svc-Project (what playground-client.ts sends), recorded as the operator's inference.

let t: TestApp;
let idp: ReturnType<typeof testSamlIdp>;
let projectId: string;
let adminId: string;

beforeAll(async () => {
  const keys = testSigningKeys();
  t = await buildTestApp({ env: ssoEnv(keys.cert) });
  idp = testSamlIdp(keys);
  projectId = (await seedProject(client(t.app), { name: 'Playground' })).projectId;
  adminId = await provisionUser(t.app, 'ada@example.com');
  const viewerId = await provisionUser(t.app, 'vic@example.com');
  const admins = await provisionGroup(t.app, 'pg-admins', [adminId]);
  const viewers = await provisionGroup(t.app, 'pg-viewers', [viewerId]);
  expect((await client(t.app).put(`/v1/operator-groups/${admins}/roles`, { roles: [{ project_id: projectId, role: 'admin' }] })).status).toBe(200);
  expect((await client(t.app).put(`/v1/operator-groups/${viewers}/roles`, { roles: [{ project_id: projectId, role: 'viewer' }] })).status).toBe(200);
}, 180_000);
afterAll(() => t?.close());

const body = { model: 'mock-1', messages: [{ role: 'user', content: 'from the console' }], stream: true, stream_options: { include_usage: true } };

describe('a console session in the Playground', () => {
  it('streams a chat completion recorded as the operator\'s', async () => {
    const s = await signInBySaml(t.app, idp, 'ada@example.com');
    const res = await s.api.project(projectId).post('/v1/chat/completions', body);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(res.headers['x-svc-key-id']).toBe(adminId);
    const requestId = res.headers['x-svc-request-id'] as string;
    await t.deps.outcomes.flush({ timeoutMs: 10_000 });
    expect(await t.deps.db.usageRecord.findFirst({ where: { requestId } })).toMatchObject({ projectId, keyId: adminId, model: 'mock-1', status: 'succeeded' });
  });

  it('is refused without the CSRF token, and for a viewer', async () => {
    const s = await signInBySaml(t.app, idp, 'ada@example.com');
    const noCsrf = await sessionClient(t.app, s.token, null, projectId).post('/v1/chat/completions', body);
    expectError(noCsrf as never, 403, 'insufficient_scope');
    expect(noCsrf.body.error.message).toMatch(/X-Svc-CSRF-Token/);
    const v = await signInBySaml(t.app, idp, 'vic@example.com');
    expectError(await v.api.project(projectId).post('/v1/chat/completions', body) as never, 403, 'insufficient_scope');
  });
});
