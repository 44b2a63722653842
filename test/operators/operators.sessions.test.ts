import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import {
  postAssertion,
  provisionGroup,
  provisionUser,
  sessionClient,
  signInBySaml,
  ssoEnv,
  testSamlIdp,
  testSigningKeys,
} from '../helpers/sso.ts';

const IDLE_S = 60;
const ABSOLUTE_S = 600;

let t: TestApp;
let idp: ReturnType<typeof testSamlIdp>;
let keys: { key: string; cert: string };
let p1: string;
let p2: string;
let p3: string;
let vera: string;
let adam: string;
let groupV: string;
let groupA: string;

const operator = () => client(t.app);
const audit = async (action: string) => (await operator().get('/v1/audit/events', { query: { action, limit: 100 } })).body.data as any[];

beforeAll(async () => {
  keys = testSigningKeys();
  t = await buildTestApp({ env: ssoEnv(keys.cert, { SVC_SESSION_IDLE_TIMEOUT_S: String(IDLE_S), SVC_SESSION_ABSOLUTE_TIMEOUT_S: String(ABSOLUTE_S) }) });
  idp = testSamlIdp(keys);
  p1 = (await seedProject(operator(), { name: 'One' })).projectId;
  p2 = (await seedProject(operator(), { name: 'Two' })).projectId;
  p3 = (await seedProject(operator(), { name: 'Three' })).projectId;
  vera = await provisionUser(t.app, 'vera@example.com');
  adam = await provisionUser(t.app, 'adam@example.com');
  groupV = await provisionGroup(t.app, 'viewers', [vera]);
  groupA = await provisionGroup(t.app, 'admins', [adam]);
  expect((await operator().put(`/v1/operator-groups/${groupV}/roles`, { roles: [{ project_id: p1, role: 'viewer' }] })).status).toBe(200);
  expect((await operator().put(`/v1/operator-groups/${groupA}/roles`, { roles: [{ project_id: p1, role: 'admin' }, { project_id: p2, role: 'viewer' }] })).status).toBe(200);
}, 180_000);
afterAll(async () => {
  await t?.close();
});

describe('console sessions act through the same services as keys', () => {
  it('a viewer reads its project (REST and GraphQL) and gets 403 insufficient_scope for a write', async () => {
    const s = await signInBySaml(t.app, idp, 'vera@example.com');
    const api = s.api.project(p1);
    const keysList = await api.get(`/v1/keys?project_id=${p1}`);
    expect(keysList.status).toBe(200);
    expect(keysList.headers['x-svc-key-id']).toBe(vera);
    expect(keysList.headers['x-svc-project']).toBe(p1);
    expect((await api.get(`/v1/projects/${p1}/rate-limits`)).status).toBe(200);
    expectError(await api.post('/v1/keys', { project_id: p1, name: 'nope', scopes: ['models:read'] }), 403, 'insufficient_scope');
    expectError(await api.put(`/v1/projects/${p1}/rate-limits`, { requests_per_minute: 10, tokens_per_minute: 10, burst: 0 }), 403, 'insufficient_scope');

    const read = await api.gql('query($p: ID!) { rateLimits(projectId: $p) { requestsPerMinute } viewer { kind keyId projectId } }', { p: p1 });
    expect(read.body.errors).toBeUndefined();
    expect(read.body.data.viewer).toEqual({ kind: 'session', keyId: vera, projectId: p1 });
    const write = await api.gql(
      'mutation($p: ID!) { updateRateLimits(projectId: $p, input: { requestsPerMinute: 10, tokensPerMinute: 10, burst: 0 }) { burst } }',
      { p: p1 },
    );
    expect(write.body.errors[0].extensions).toMatchObject({ code: 'insufficient_scope', http_status: 403 });
    // Both refusals are audited, naming the operator, the role and the action.
    const refused = (await audit('operator.request_refused')).filter((e) => e.data.reason === 'role');
    expect(refused.map((e) => e.data.action)).toEqual(['rate_limits.update', 'rate_limits.update', 'key.create']);
    expect(refused[0]).toMatchObject({ actor_key_id: vera, project_id: p1, target_id: s.session.id });
    expect(refused[0].data).toMatchObject({ role: 'viewer' });
  });

  it('sees only its groups\' projects: another project is 404 not_found on REST and GraphQL', async () => {
    const s = await signInBySaml(t.app, idp, 'vera@example.com');
    // One project: the session addresses it without naming it.
    const list = await s.api.get('/v1/projects');
    expect(list.body.data.map((p: { id: string }) => p.id)).toEqual([p1]);
    expectError(await s.api.get(`/v1/projects/${p2}`), 404, 'not_found');
    expectError(await s.api.get(`/v1/keys?project_id=${p3}`), 404, 'not_found', 'project_id');
    expectError(await s.api.project(p2).get('/v1/keys'), 404, 'not_found', 'project_id');
    const gql = await s.api.gql('query($id: ID!) { project(id: $id) { id } }', { id: p3 });
    expect(gql.body.errors[0].extensions).toMatchObject({ code: 'not_found' });
    const projects = await s.api.gql('{ projects(first: 10) { edges { node { id } } } }');
    expect(projects.body.data.projects.edges.map((e: any) => e.node.id)).toEqual([p1]);
  });

  it('an operator in several projects names one per request, and acts with that project\'s role', async () => {
    const s = await signInBySaml(t.app, idp, 'adam@example.com');
    expect((await s.api.get('/v1/projects')).body.data.map((p: { id: string }) => p.id).sort()).toEqual([p1, p2].sort());
    expectError(await s.api.get('/v1/keys'), 400, 'missing_project_id', 'project_id');
    const made = await s.api.project(p1).post('/v1/keys', { project_id: p1, name: 'adam-key', scopes: ['models:read', 'inference:write'] });
    expect(made.status).toBe(200);
    // Viewer in p2: reads only, although admin in p1.
    expect((await s.api.project(p2).get('/v1/keys')).status).toBe(200);
    expectError(await s.api.project(p2).post('/v1/keys', { project_id: p2, name: 'x', scopes: ['models:read'] }), 403, 'insufficient_scope');
    // Unbound, with a viewer role somewhere: only reads, even naming its admin project in the body.
    expectError(await s.api.post('/v1/keys', { project_id: p1, name: 'y', scopes: ['models:read'] }), 403, 'insufficient_scope');
    const [created] = await audit('key.create');
    expect(created).toMatchObject({ actor_key_id: adam, project_id: p1, target_id: made.body.id });
  });

  it('refuses a cookie request without its CSRF token (403, audited), on REST and GraphQL', async () => {
    const s = await signInBySaml(t.app, idp, 'vera@example.com');
    const noCsrf = sessionClient(t.app, s.token, null, p1);
    expectError(await noCsrf.get('/v1/projects'), 403, 'insufficient_scope');
    expectError(await noCsrf.gql('{ viewer { keyId } }'), 403, 'insufficient_scope');
    const wrong = sessionClient(t.app, s.token, 'A'.repeat(43), p1);
    expectError(await wrong.get('/v1/projects'), 403, 'insufficient_scope');
    const [event] = await audit('operator.request_refused');
    expect(event).toMatchObject({ actor_key_id: vera, target_id: s.session.id });
    expect(event.data).toMatchObject({ reason: 'csrf' });
    // A key in the Authorization header wins over the cookie (no CSRF needed for a key).
    const withKey = await t.app.inject({ method: 'GET', url: '/v1/projects', headers: { cookie: `svc_session=${s.token}`, authorization: `Bearer ${t.config.masterKey}` } });
    expect(withKey.statusCode).toBe(200);
  });

  it('signs the operator out after the idle timeout (injected clock), and audits it', async () => {
    const s = await signInBySaml(t.app, idp, 'vera@example.com');
    t.clock.advance((IDLE_S - 1) * 1000);
    expect((await s.api.get('/v1/projects')).status).toBe(200);
    // Activity moved the idle clock: another IDLE_S - 1 seconds is still fine.
    t.clock.advance((IDLE_S - 1) * 1000);
    expect((await s.api.get('/v1/projects')).status).toBe(200);
    t.clock.advance(IDLE_S * 1000);
    const res = await s.api.get('/v1/projects');
    expectError(res, 401, 'invalid_api_key');
    expect(res.body.error.message).toContain('idle timeout');
    const [event] = await audit('operator.sign_out');
    expect(event).toMatchObject({ actor_key_id: vera, target_id: s.session.id });
    expect(event.data).toMatchObject({ reason: 'idle_timeout' });
    expectError(await s.api.get('/v1/projects'), 401, 'invalid_api_key');
  });

  it('ends a busy session at the absolute timeout', async () => {
    const s = await signInBySaml(t.app, idp, 'vera@example.com');
    for (let elapsed = 0; elapsed < ABSOLUTE_S - IDLE_S; elapsed += IDLE_S / 2) {
      t.clock.advance((IDLE_S / 2) * 1000);
      expect((await s.api.get('/auth/session')).status).toBe(200);
    }
    t.clock.advance(IDLE_S * 1000);
    const res = await s.api.get('/auth/session');
    expectError(res, 401, 'invalid_api_key');
    expect(res.body.error.message).toContain('absolute timeout');
    expect((await audit('operator.sign_out'))[0].data).toMatchObject({ reason: 'absolute_timeout' });
  });

  it('refuses a session from outside a project\'s IP allowlist (403, audited); the list is set on REST and GraphQL', async () => {
    const s = await signInBySaml(t.app, idp, 'adam@example.com');
    const set = await operator().put(`/v1/projects/${p2}/ip-allowlist`, { cidrs: ['10.0.0.0/8', '192.0.2.7'] });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ object: 'svc.ip_allowlist', project_id: p2, cidrs: ['10.0.0.0/8', '192.0.2.7'] });
    expectError(await s.api.project(p2).get('/v1/keys'), 403, 'insufficient_scope');
    const [event] = await audit('operator.request_refused');
    expect(event).toMatchObject({ actor_key_id: adam, project_id: p2 });
    expect(event.data).toMatchObject({ reason: 'project_ip_not_allowed' });
    // From an allowed address it passes; other projects are not affected.
    const fromOffice = await t.app.inject({
      method: 'GET',
      url: '/v1/keys',
      remoteAddress: '10.1.2.3',
      headers: { cookie: `svc_session=${s.token}`, 'x-svc-csrf-token': s.csrf, 'x-svc-project': p2 },
    });
    expect(fromOffice.statusCode).toBe(200);
    expect((await s.api.project(p1).get('/v1/keys')).status).toBe(200);

    const gql = await operator().post('/graphql', {
      query: 'mutation($p: ID!, $c: [String!]!) { setProjectIpAllowlist(projectId: $p, cidrs: $c) { projectId cidrs } }',
      variables: { p: p2, c: [] },
    });
    expect(gql.body.data.setProjectIpAllowlist).toEqual({ projectId: p2, cidrs: [] });
    expect((await s.api.project(p2).get('/v1/keys')).status).toBe(200);
    expect((await audit('ip_allowlist.update'))[0]).toMatchObject({ project_id: p2, actor_key_id: 'key_master' });
  });

  it('validates an IP allowlist: 400 naming the entry; another project\'s list is 404 for a key', async () => {
    expectError(await operator().put(`/v1/projects/${p1}/ip-allowlist`, { cidrs: ['10.0.0.0/8', 'not-an-ip'] }), 400, 'invalid_request', 'cidrs[1]');
    expectError(await operator().put(`/v1/projects/${p1}/ip-allowlist`, {}), 400, 'invalid_request', 'cidrs');
    expectError(await operator().get('/v1/projects/prj_nope/ip-allowlist'), 404, 'not_found');
    const own = await seedProject(operator(), { scopes: ['governance:manage'] });
    const key = client(t.app, own.secret);
    expect((await key.get(`/v1/projects/${own.projectId}/ip-allowlist`)).body.cidrs).toEqual([]);
    expectError(await key.get(`/v1/projects/${p1}/ip-allowlist`), 404, 'not_found');
    const gql = await key.post('/graphql', { query: 'mutation($p: ID!) { setProjectIpAllowlist(projectId: $p, cidrs: ["300.1.1.1"]) { cidrs } }', variables: { p: own.projectId } });
    expect(gql.body.errors[0].extensions).toMatchObject({ code: 'invalid_request', param: 'cidrs[0]' });
  });

  it('group roles: the operator key only; bad roles are 400 naming the field; unknown projects 404 (REST and GraphQL)', async () => {
    const own = await seedProject(operator(), { scopes: ['governance:manage', 'keys:manage'] });
    expectError(await client(t.app, own.secret).put(`/v1/operator-groups/${groupV}/roles`, { roles: [] }), 403, 'insufficient_scope');
    expectError(await client(t.app, own.secret).get('/v1/operator-groups'), 403, 'insufficient_scope');
    expectError(await operator().put(`/v1/operator-groups/${groupV}/roles`, { roles: [{ project_id: p1, role: 'owner' }] }), 400, 'invalid_request', 'roles[0].role');
    expectError(
      await operator().put(`/v1/operator-groups/${groupV}/roles`, { roles: [{ project_id: p1, role: 'viewer' }, { project_id: p1, role: 'admin' }] }),
      400,
      'invalid_request',
      'roles[1].project_id',
    );
    expectError(await operator().put(`/v1/operator-groups/${groupV}/roles`, { roles: [{ project_id: 'prj_nope', role: 'viewer' }] }), 404, 'not_found', 'roles[0].project_id');
    expectError(await operator().put('/v1/operator-groups/grp_nope/roles', { roles: [] }), 404, 'not_found', 'group_id');

    const bad = await operator().post('/graphql', {
      query: 'mutation($g: ID!) { setOperatorGroupRoles(groupId: $g, roles: [{ projectId: "x", role: "owner" }]) { id } }',
      variables: { g: groupV },
    });
    expect(bad.body.errors[0].extensions).toMatchObject({ code: 'invalid_request', param: 'roles[0].role' });
    const list = await operator().post('/graphql', { query: '{ operatorGroups { id displayName members roles { projectId role } } }' });
    expect(list.body.data.operatorGroups).toContainEqual({ id: groupV, displayName: 'viewers', members: [vera], roles: [{ projectId: p1, role: 'viewer' }] });
    const rest = await operator().get('/v1/operator-groups');
    expect(rest.body.data).toContainEqual(expect.objectContaining({ id: groupV, object: 'svc.operator_group', members: [vera], roles: [{ project_id: p1, role: 'viewer' }] }));
    const [event] = await audit('operator_group.roles_update');
    expect(event).toMatchObject({ actor_key_id: 'key_master', target_id: groupA });
  });

  it('GET /auth/session without a cookie is 401; a made-up cookie is 401', async () => {
    expectError(await client(t.app, '').get('/auth/session', { key: null }), 401, 'invalid_api_key');
    expectError(await sessionClient(t.app, 'B'.repeat(43), null).get('/auth/session'), 401, 'invalid_api_key');
  });
});

describe("the console's IP allowlist (SVC_CONSOLE_IP_ALLOWLIST)", () => {
  let locked: TestApp;
  beforeAll(async () => {
    locked = await buildTestApp({ env: ssoEnv(keys.cert, { SVC_CONSOLE_IP_ALLOWLIST: '10.0.0.0/8,2001:db8::/32' }) });
    await provisionUser(locked.app, 'vera@example.com');
  }, 180_000);
  afterAll(async () => {
    await locked?.close();
  });

  it('refuses sign-in from elsewhere (403, audited) and lets an allowed address sign in; sessions keep being checked', async () => {
    const methods = await locked.app.inject({ method: 'GET', url: '/auth/methods' });
    expect(methods.statusCode).toBe(403);
    expect(JSON.parse(methods.body).error.code).toBe('insufficient_scope');
    expect((await locked.app.inject({ method: 'GET', url: '/auth/saml/login' })).statusCode).toBe(403);
    const refused = await postAssertion(locked.app, await idp.response('vera@example.com'));
    expect(refused.res.headers.location).toBe('/admin/?signin_error=ip_not_allowed');
    expect(refused.token).toBeNull();
    const events = (await client(locked.app).get('/v1/audit/events', { query: { action: 'operator.sign_in_refused' } })).body.data;
    expect(events[0].data).toMatchObject({ reason: 'ip_not_allowed' });
    expect(events[0].ip).toBe('127.0.0.1');

    const allowed = await postAssertion(locked.app, await idp.response('vera@example.com'), '10.9.8.7');
    expect(allowed.res.headers.location).toBe('/admin/');
    const session = await locked.app.inject({ method: 'GET', url: '/auth/session', remoteAddress: '10.9.8.7', headers: { cookie: `svc_session=${allowed.token}` } });
    expect(session.statusCode).toBe(200);
    // The same cookie from outside the list is refused.
    const outside = await locked.app.inject({ method: 'GET', url: '/auth/session', headers: { cookie: `svc_session=${allowed.token}` } });
    expect(outside.statusCode).toBe(403);
  });
});
