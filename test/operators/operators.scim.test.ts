import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, createTestDatabase, seedProject, type TestApp, type TestDatabase } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { REDIS_URL, deleteRedisPrefix, uniqueName } from '../helpers/services.ts';
import {
  GROUP_SCHEMA,
  PATCH_SCHEMA,
  SCIM_TOKEN,
  USER_SCHEMA,
  provisionGroup,
  provisionUser,
  scim,
  signInBySaml,
  ssoEnv,
  testSamlIdp,
  testSigningKeys,
} from '../helpers/sso.ts';

// Two replicas on one database and one Redis prefix: SCIM reaches one, the operator's session lives on the other.
let db: TestDatabase;
let a: TestApp;
let b: TestApp;
let idp: ReturnType<typeof testSamlIdp>;
const redisPrefix = `${uniqueName('scim')}:`;
let p1: string;
let p2: string;

beforeAll(async () => {
  const keys = testSigningKeys();
  db = await createTestDatabase();
  a = await buildTestApp({ env: ssoEnv(keys.cert), database: db, redisPrefix });
  // The second replica has no SCIM token configured: SCIM is off there.
  const { SVC_SCIM_TOKEN: _off, ...withoutScim } = ssoEnv(keys.cert);
  b = await buildTestApp({ env: withoutScim, database: db, redisPrefix, clock: a.clock });
  idp = testSamlIdp(keys);
  p1 = (await seedProject(client(a.app), { name: 'Payments' })).projectId;
  p2 = (await seedProject(client(a.app), { name: 'Search' })).projectId;
}, 180_000);
afterAll(async () => {
  await b?.close();
  await a?.close();
  await db?.drop();
  if (REDIS_URL) await deleteRedisPrefix(REDIS_URL, redisPrefix);
});

const setRoles = async (groupId: string, roles: { project_id: string; role: string }[]) => {
  const res = await client(a.app).put(`/v1/operator-groups/${groupId}/roles`, { roles });
  expect(res.status).toBe(200);
  return res.body;
};
const projectIds = async (api: { get(url: string): Promise<{ status: number; body: any }> }) => {
  const res = await api.get('/v1/projects');
  expect(res.status).toBe(200);
  return (res.body.data as { id: string }[]).map((p) => p.id).sort();
};

describe('SCIM 2.0 provisioning (scimmy), as an identity provider calls it', () => {
  it('refuses a missing or wrong bearer token with a SCIM error, and is off where no token is configured', async () => {
    for (const token of [null, 'wrong-token-0123456789abcdefghijklmnopqrstuvwxyz']) {
      const res = await scim(a.app, token)('GET', '/scim/v2/Users');
      expect(res.status).toBe(401);
      expect(res.headers['content-type']).toContain('application/scim+json');
      expect(res.headers['www-authenticate']).toContain('Bearer');
      expect(res.body).toMatchObject({ schemas: ['urn:ietf:params:scim:api:messages:2.0:Error'], status: '401' });
    }
    const off = await scim(b.app)('GET', '/scim/v2/Users');
    expect(off.status).toBe(404);
    expect(off.body.schemas).toEqual(['urn:ietf:params:scim:api:messages:2.0:Error']);
  });

  it('creates a user (201, Location), finds it by filter, refuses a second one with the same userName (409 uniqueness)', async () => {
    const call = scim(a.app);
    const created = await call('POST', '/scim/v2/Users', {
      schemas: [USER_SCHEMA],
      userName: 'Bob@Example.com',
      externalId: 'okta-00u1',
      displayName: 'Bob',
      emails: [{ value: 'bob@example.com', primary: true, type: 'work' }],
      active: true,
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ schemas: [USER_SCHEMA], userName: 'Bob@Example.com', externalId: 'okta-00u1', displayName: 'Bob', active: true });
    expect(created.body.id).toMatch(/^opr_/);
    expect(created.headers.location).toBe(`/scim/v2/Users/${created.body.id}`);
    expect(created.body.meta).toMatchObject({ resourceType: 'User', location: `/scim/v2/Users/${created.body.id}` });

    const found = await call('GET', `/scim/v2/Users?filter=${encodeURIComponent('userName eq "Bob@Example.com"')}`);
    expect(found.status).toBe(200);
    expect(found.body).toMatchObject({ schemas: ['urn:ietf:params:scim:api:messages:2.0:ListResponse'], totalResults: 1 });
    expect(found.body.Resources[0].id).toBe(created.body.id);
    const none = await call('GET', `/scim/v2/Users?filter=${encodeURIComponent('userName eq "nobody@example.com"')}`);
    expect(none.body.totalResults).toBe(0);

    // userName is case-insensitive (RFC 7643 §4.1.1).
    const again = await call('POST', '/scim/v2/Users', { schemas: [USER_SCHEMA], userName: 'bob@example.com' });
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ status: '409', scimType: 'uniqueness' });

    const missing = await call('POST', '/scim/v2/Users', { schemas: [USER_SCHEMA], displayName: 'no user name' });
    expect(missing.status).toBe(400);
    expect(missing.body.schemas).toEqual(['urn:ietf:params:scim:api:messages:2.0:Error']);

    const unknown = await call('GET', '/scim/v2/Users/opr_nope');
    expect(unknown.status).toBe(404);

    const audit = await client(a.app).get('/v1/audit/events', { query: { action: 'operator.create' } });
    expect(audit.body.data[0]).toMatchObject({ actor_key_id: 'scim', target_id: created.body.id });
  });

  it('maps groups to a role per project; a group PATCH takes effect on the next request of a signed-in operator', async () => {
    const carol = await provisionUser(a.app, 'carol@example.com');
    const viewers = await provisionGroup(a.app, 'payments-viewers', [carol]);
    const admins = await provisionGroup(a.app, 'search-admins', []);
    await setRoles(viewers, [{ project_id: p1, role: 'viewer' }]);
    const group = await setRoles(admins, [{ project_id: p2, role: 'admin' }]);
    expect(group).toMatchObject({ id: admins, object: 'svc.operator_group', display_name: 'search-admins', members: [], roles: [{ project_id: p2, role: 'admin' }] });

    // The session lives on replica b; SCIM reaches replica a.
    const s = await signInBySaml(b.app, idp, 'carol@example.com');
    expect(await projectIds(s.api)).toEqual([p1]);
    expect(s.session.projects).toEqual([{ project_id: p1, role: 'viewer' }]);

    // Okta-style add of a member.
    const added = await scim(a.app)('PATCH', `/scim/v2/Groups/${admins}`, {
      schemas: [PATCH_SCHEMA],
      Operations: [{ op: 'add', path: 'members', value: [{ value: carol }] }],
    });
    expect(added.status).toBe(200);
    expect(added.body.members).toEqual([expect.objectContaining({ value: carol })]);
    expect(await projectIds(s.api)).toEqual([p1, p2].sort());
    // An admin of p2 acts there (creates a key), and the audit names the operator.
    const key = await s.api.project(p2).post('/v1/keys', { project_id: p2, name: 'made-by-carol', scopes: ['models:read'] });
    expect(key.status).toBe(200);
    const created = await client(a.app).get('/v1/audit/events', { query: { action: 'key.create', project_id: p2 } });
    expect(created.body.data[0]).toMatchObject({ actor_key_id: carol, target_id: key.body.id });

    // Entra-style removal by filter path.
    const removed = await scim(a.app)('PATCH', `/scim/v2/Groups/${viewers}`, {
      schemas: [PATCH_SCHEMA],
      Operations: [{ op: 'Remove', path: `members[value eq "${carol}"]` }],
    });
    expect([200, 204]).toContain(removed.status);
    expect(await projectIds(s.api)).toEqual([p2]);
    expectError(await s.api.get(`/v1/projects/${p1}`), 404, 'not_found');

    const update = await client(a.app).get('/v1/audit/events', { query: { action: 'operator_group.update' } });
    expect(update.body.data[0]).toMatchObject({ actor_key_id: 'scim', target_id: viewers });
    expect(update.body.data[0].data).toMatchObject({ removed: [carol], added: [] });
  });

  it('replaces a user with PUT and a group with PUT; refuses a member that is not a provisioned user', async () => {
    const dan = await provisionUser(a.app, 'dan@example.com');
    const put = await scim(a.app)('PUT', `/scim/v2/Users/${dan}`, { schemas: [USER_SCHEMA], userName: 'daniel@example.com', displayName: 'Daniel', active: true });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ id: dan, userName: 'daniel@example.com', displayName: 'Daniel' });
    const g = await provisionGroup(a.app, 'temp', [dan]);
    const bad = await scim(a.app)('PUT', `/scim/v2/Groups/${g}`, { schemas: [GROUP_SCHEMA], displayName: 'temp', members: [{ value: 'opr_unknown' }] });
    expect(bad.status).toBe(400);
    expect(bad.body.scimType).toBe('invalidValue');
    const dup = await scim(a.app)('POST', '/scim/v2/Groups', { schemas: [GROUP_SCHEMA], displayName: 'TEMP' });
    expect(dup.status).toBe(409);
    expect((await scim(a.app)('DELETE', `/scim/v2/Groups/${g}`)).status).toBe(204);
    expect((await scim(a.app)('GET', `/scim/v2/Groups/${g}`)).status).toBe(404);
  });

  it('deprovisioning (DELETE) ends the operator\'s sessions at once, on the other replica too', async () => {
    const erin = await provisionUser(a.app, 'erin@example.com');
    const group = await provisionGroup(a.app, 'erin-viewers', [erin]);
    await setRoles(group, [{ project_id: p1, role: 'viewer' }]);
    const onB = await signInBySaml(b.app, idp, 'erin@example.com');
    const onA = await signInBySaml(a.app, idp, 'erin@example.com');
    expect((await onB.api.get('/v1/projects')).status).toBe(200);

    const del = await scim(a.app)('DELETE', `/scim/v2/Users/${erin}`);
    expect(del.status).toBe(204);
    expect(del.raw).toBe('');
    expectError(await onB.api.get('/v1/projects'), 401, 'invalid_api_key');
    expectError(await onA.api.gql('{ viewer { keyId } }'), 401, 'invalid_api_key');
    expect((await scim(a.app)('GET', `/scim/v2/Users/${erin}`)).status).toBe(404);
    const ended = await client(a.app).get('/v1/audit/events', { query: { action: 'operator.sign_out' } });
    const mine = (ended.body.data as any[]).filter((e) => e.data.operator_id === erin);
    expect(mine.map((e) => e.data.reason)).toEqual(['deprovisioned', 'deprovisioned']);
    expect(mine.map((e) => e.target_id).sort()).toEqual([onA.session.id, onB.session.id].sort());
    const deleted = await client(a.app).get('/v1/audit/events', { query: { action: 'operator.delete' } });
    expect(deleted.body.data[0]).toMatchObject({ actor_key_id: 'scim', target_id: erin });
  });

  it('deactivation (PATCH active: false) ends the sessions too', async () => {
    const fay = await provisionUser(a.app, 'fay@example.com');
    const s = await signInBySaml(b.app, idp, 'fay@example.com');
    expect((await s.api.get('/auth/session')).status).toBe(200);
    const res = await scim(a.app)('PATCH', `/scim/v2/Users/${fay}`, { schemas: [PATCH_SCHEMA], Operations: [{ op: 'replace', path: 'active', value: false }] });
    expect(res.status).toBe(200);
    expect(res.body.active).toBe(false);
    expectError(await s.api.get('/auth/session'), 401, 'invalid_api_key');
  });

  it('publishes ServiceProviderConfig, ResourceTypes and Schemas', async () => {
    const config = await scim(a.app)('GET', '/scim/v2/ServiceProviderConfig');
    expect(config.status).toBe(200);
    expect(config.body).toMatchObject({ patch: { supported: true }, filter: { supported: true }, bulk: { supported: false } });
    expect((await scim(a.app)('GET', '/scim/v2/ResourceTypes')).body.totalResults).toBe(2);
    expect((await scim(a.app)('GET', '/scim/v2/Schemas')).status).toBe(200);
    expect(SCIM_TOKEN.length).toBeGreaterThanOrEqual(32);
  });
});
