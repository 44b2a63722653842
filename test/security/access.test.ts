import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, loginAtProvider, startOidcProvider, type TestOidcProvider } from '../helpers/oidc-provider.ts';
import {
  SCIM_TOKEN,
  SP_BASE,
  provisionGroup,
  provisionUser,
  scim,
  sessionClient,
  signInBySaml,
  ssoEnv,
  testSamlIdp,
  testSigningKeys,
} from '../helpers/sso.ts';

/**
 * Issue 36, access: a project's console IP allowlist wherever the project is named (header, path, query, body, GraphQL
 * argument); OIDC's unverified e-mail; SCIM's failed-token throttle. One gateway with SAML, OIDC and SCIM configured.
 */

let t: TestApp;
let provider: TestOidcProvider;
let idp: ReturnType<typeof testSamlIdp>;
let pA: string;
let pB: string;
let olga: string;
const OFFICE = '10.0.0.0/8';

const operator = () => client(t.app);
const audit = async (action: string) => (await operator().get('/v1/audit/events', { query: { action, limit: 100 } })).body.data as any[];
const keysInB = () => t.deps.db.apiKey.count({ where: { projectId: pB } });
const allowlistOfB = async () => (await operator().get(`/v1/projects/${pB}/ip-allowlist`)).body.cidrs as string[];

beforeAll(async () => {
  const signing = testSigningKeys();
  provider = await startOidcProvider(`${SP_BASE}/auth/oidc/callback`, {
    // bob's provider has not verified his e-mail; carol's says nothing about it; everyone else's is verified.
    claimsOf: (sub) =>
      sub.startsWith('bob@') ? { email: sub, email_verified: false } : sub.startsWith('carol@') ? { email: sub } : { email: sub, email_verified: true },
  });
  t = await buildTestApp({
    env: ssoEnv(signing.cert, { SVC_OIDC_ISSUER: provider.issuer, SVC_OIDC_CLIENT_ID: OIDC_CLIENT_ID, SVC_OIDC_CLIENT_SECRET: OIDC_CLIENT_SECRET }),
  });
  idp = testSamlIdp(signing);
  pA = (await seedProject(operator(), { name: 'Open' })).projectId;
  pB = (await seedProject(operator(), { name: 'Office only' })).projectId;
  olga = await provisionUser(t.app, 'olga@example.com');
  const group = await provisionGroup(t.app, 'admins', [olga]);
  expect((await operator().put(`/v1/operator-groups/${group}/roles`, { roles: [{ project_id: pA, role: 'admin' }, { project_id: pB, role: 'admin' }] })).status).toBe(200);
  expect((await operator().put(`/v1/projects/${pB}/ip-allowlist`, { cidrs: [OFFICE] })).status).toBe(200);
  for (const name of ['alice@example.com', 'bob@example.com', 'carol@example.com']) await provisionUser(t.app, name);
}, 180_000);
afterAll(async () => {
  await t?.close();
  await provider?.close();
});

describe("a project's console IP allowlist binds a session wherever the project is named", () => {
  it('refuses B named in the body of POST /v1/keys as it refuses B named in the header (403, audited); no key is made', async () => {
    const s = await signInBySaml(t.app, idp, 'olga@example.com');
    const before = await keysInB();
    // Today's refusal, the project named by header.
    const byHeader = await s.api.project(pB).post('/v1/keys', { project_id: pB, name: 'by-header', scopes: ['models:read'] });
    expectError(byHeader, 403, 'insufficient_scope');
    const byBody = await s.api.post('/v1/keys', { project_id: pB, name: 'by-body', scopes: ['models:read'] });
    expectError(byBody, 403, 'insufficient_scope');
    expect(byBody.body.error.message).toBe(byHeader.body.error.message);
    expect(byBody.body.secret).toBeUndefined();
    expect(await keysInB()).toBe(before);
    const [event] = await audit('operator.request_refused');
    expect(event).toMatchObject({ actor_key_id: olga, project_id: pB, target_id: s.session.id });
    expect(event.data).toMatchObject({ reason: 'project_ip_not_allowed' });

    // The query string and the path's own id are refused alike; project A (no allowlist) still works by body.
    expectError(await s.api.get(`/v1/keys?project_id=${pB}`), 403, 'insufficient_scope');
    expectError(await s.api.get(`/v1/projects/${pB}`), 403, 'insufficient_scope');
    const inA = await s.api.post('/v1/keys', { project_id: pA, name: 'in-a', scopes: ['models:read'] });
    expect(inA.status).toBe(200);
    // From the office, naming B in the body works.
    const fromOffice = await t.app.inject({
      method: 'POST',
      url: '/v1/keys',
      remoteAddress: '10.1.2.3',
      headers: { cookie: `svc_session=${s.token}`, 'x-svc-csrf-token': s.csrf, 'content-type': 'application/json' },
      payload: JSON.stringify({ project_id: pB, name: 'from-office', scopes: ['models:read'] }),
    });
    expect(fromOffice.statusCode).toBe(200);
    expect(await keysInB()).toBe(before + 1);
  });

  it('refuses B named as a GraphQL argument: keys(projectId:), project(id:), createKey, setProjectIpAllowlist (which keeps the list)', async () => {
    const s = await signInBySaml(t.app, idp, 'olga@example.com');
    const before = await keysInB();
    const refusedIn = (res: { body: any }) => {
      expect(res.body.errors?.[0]?.extensions).toMatchObject({ code: 'insufficient_scope', http_status: 403 });
      expect(res.body.errors[0].message).toBe("This address is not in the project's console IP allowlist.");
    };
    refusedIn(await s.api.gql('query($p: ID!) { keys(projectId: $p, first: 5) { edges { node { id } } } }', { p: pB }));
    refusedIn(await s.api.gql('query($p: ID!) { project(id: $p) { id name } }', { p: pB }));
    refusedIn(await s.api.gql('query($p: ID!) { projectIpAllowlist(projectId: $p) { cidrs } }', { p: pB }));
    refusedIn(
      await s.api.gql('mutation($p: ID!) { createKey(input: { projectId: $p, name: "gql-b", scopes: ["models:read"] }) { secret } }', { p: pB }),
    );
    const erase = await s.api.gql('mutation($p: ID!) { setProjectIpAllowlist(projectId: $p, cidrs: []) { cidrs } }', { p: pB });
    refusedIn(erase);
    expect(erase.body.data?.setProjectIpAllowlist ?? null).toBeNull();
    expect(await allowlistOfB()).toEqual([OFFICE]);
    expect(await keysInB()).toBe(before);
    // REST's PUT with B in the path was refused before this change too: still refused, still the list.
    expectError(await s.api.put(`/v1/projects/${pB}/ip-allowlist`, { cidrs: [] }), 403, 'insufficient_scope');
    expect(await allowlistOfB()).toEqual([OFFICE]);
    const refusals = (await audit('operator.request_refused')).filter((e) => e.project_id === pB && e.data.reason === 'project_ip_not_allowed');
    expect(refusals.length).toBeGreaterThanOrEqual(5);

    // Project A answers GraphQL as before; the list of projects still shows B (the console's picker), as it did.
    const a = await s.api.gql('query($p: ID!) { keys(projectId: $p, first: 5) { edges { node { id } } } }', { p: pA });
    expect(a.body.errors).toBeUndefined();
    const list = await s.api.gql('{ projects(first: 10) { edges { node { id } } } }');
    expect(list.body.data.projects.edges.map((e: any) => e.node.id).sort()).toEqual([pA, pB].sort());
  });
});

/** GET /auth/oidc/start, the provider's login as `login`, and the callback: where the browser lands and its session. */
async function oidcSignIn(login: string) {
  const start = await t.app.inject({ method: 'GET', url: '/auth/oidc/start' });
  expect(start.statusCode).toBe(302);
  const pair = ([] as string[]).concat(start.headers['set-cookie'] ?? []).find((c) => c.startsWith('svc_oidc='))!.split(';')[0]!;
  const back = await loginAtProvider(start.headers.location as string, login);
  const res = await t.app.inject({ method: 'GET', url: `${back.pathname}${back.search}`, headers: { cookie: pair } });
  const session = ([] as string[]).concat(res.headers['set-cookie'] ?? []).map((c) => /^svc_session=([^;]+)/.exec(c)?.[1]).find(Boolean) ?? null;
  return { location: res.headers.location, session };
}

describe('OpenID Connect: the e-mail claim signs in only when the provider verified it', () => {
  it('refuses email_verified false and a missing email_verified (audited), and signs in a verified e-mail', async () => {
    const bob = await oidcSignIn('bob@example.com');
    expect(bob.location).toBe('/admin/?signin_error=invalid_response');
    expect(bob.session).toBeNull();
    expect((await audit('operator.sign_in_refused'))[0].data).toMatchObject({ method: 'oidc', reason: 'email_not_verified', user_name: 'bob@example.com' });

    const carol = await oidcSignIn('carol@example.com');
    expect(carol.session).toBeNull();
    expect((await audit('operator.sign_in_refused'))[0].data).toMatchObject({ method: 'oidc', reason: 'email_not_verified', user_name: 'carol@example.com' });
    expect((await audit('operator.sign_in')).map((e) => e.data.user_name)).not.toContain('bob@example.com');

    const alice = await oidcSignIn('alice@example.com');
    expect(alice.location).toBe('/admin/');
    const info = await sessionClient(t.app, alice.session!, null).get('/auth/session');
    expect(info.body).toMatchObject({ operator: { user_name: 'alice@example.com' }, method: 'oidc' });
  });
});

describe('SCIM: failed bearer tokens are throttled per source address', () => {
  const WRONG = 'wrong-token-0123456789abcdefghijklmnopqrstuvwxyz';
  const call = (token: string | null, remoteAddress: string) =>
    t.app.inject({ method: 'GET', url: '/scim/v2/Users', remoteAddress, headers: token ? { authorization: `Bearer ${token}` } : {} });
  const scimError = (res: { statusCode: number; headers: Record<string, unknown>; body: string }, status: number) => {
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toContain('application/scim+json');
    const body = JSON.parse(res.body);
    expect(body).toMatchObject({ schemas: ['urn:ietf:params:scim:api:messages:2.0:Error'], status: String(status) });
    return body;
  };

  it('answers 401 to ten wrong tokens, then 429 with Retry-After to every request from that address, a valid token too', async () => {
    const attacker = '198.51.100.7';
    for (let i = 0; i < 10; i++) scimError(await call(i % 2 ? WRONG : null, attacker), 401);
    const throttled = await call(WRONG, attacker);
    scimError(throttled, 429);
    expect(throttled.headers['retry-after']).toBe('6');
    // While throttled the token is not even checked: a right guess would otherwise show as a 200.
    const valid = await call(SCIM_TOKEN, attacker);
    scimError(valid, 429);
    expect(Number(valid.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // Another address (the identity provider's) is not affected.
    expect((await call(SCIM_TOKEN, '203.0.113.9')).statusCode).toBe(200);
    scimError(await call(WRONG, '203.0.113.9'), 401);

    // One failure's worth drains every 6 seconds (injected clock): a valid token passes, one more wrong one is 401.
    t.clock.advance(5_000);
    scimError(await call(SCIM_TOKEN, attacker), 429);
    t.clock.advance(1_000);
    expect((await call(SCIM_TOKEN, attacker)).statusCode).toBe(200);
    scimError(await call(WRONG, attacker), 401);
    scimError(await call(WRONG, attacker), 429);
    // A full minute later the window is whole again.
    t.clock.advance(60_000);
    expect((await scim(t.app)('GET', '/scim/v2/Users')).status).toBe(200);
    expect((await call(SCIM_TOKEN, attacker)).statusCode).toBe(200);
  });
});
