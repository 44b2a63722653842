import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import {
  postAssertion,
  provisionUser,
  scim,
  sessionClient,
  signInBySaml,
  ssoEnv,
  tamper,
  testSamlIdp,
  testSigningKeys,
} from '../helpers/sso.ts';

let t: TestApp;
let idp: ReturnType<typeof testSamlIdp>;
let aliceId: string;

beforeAll(async () => {
  const keys = testSigningKeys();
  t = await buildTestApp({ env: ssoEnv(keys.cert) });
  idp = testSamlIdp(keys);
  aliceId = await provisionUser(t.app, 'alice@example.com');
}, 180_000);
afterAll(async () => {
  await t?.close();
});

const audit = async (action: string) =>
  (await client(t.app).get('/v1/audit/events', { query: { action, limit: 100 } })).body.data as Record<string, any>[];

describe('SAML 2.0 sign-in (a samlify identity provider signing real assertions)', () => {
  it('accepts a signed assertion: a session cookie (HttpOnly, SameSite=Strict) and operator.sign_in naming the operator', async () => {
    const { res, setCookie, token } = await postAssertion(t.app, await idp.response('alice@example.com'));
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/admin/');
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const cookie = setCookie.find((c) => c.startsWith('svc_session='))!;
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Strict');
    expect(cookie).toContain('Path=/');
    // SVC_PUBLIC_URL is plain http on 127.0.0.1 outside production: the one case without Secure (README).
    expect(cookie).not.toContain('Secure');

    const info = await sessionClient(t.app, token!, null).get('/auth/session');
    expect(info.status).toBe(200);
    expect(info.body).toMatchObject({ object: 'svc.operator_session', operator: { id: aliceId, user_name: 'alice@example.com' }, method: 'saml', projects: [] });
    expect(info.body.csrf_token).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const [event] = await audit('operator.sign_in');
    expect(event).toMatchObject({ action: 'operator.sign_in', actor_key_id: aliceId, target_id: info.body.id, project_id: null });
    expect(event!.data).toMatchObject({ method: 'saml', user_name: 'alice@example.com' });
    // Only the digest of the cookie's token is stored.
    const row = await t.deps.db.operatorSession.findFirst({ where: { id: info.body.id } });
    expect(row === null || row.tokenHash !== token).toBe(true);
  });

  it('refuses a tampered assertion (its NameID changed after signing): no cookie, operator.sign_in_refused', async () => {
    await provisionUser(t.app, 'mallory@example.com');
    const forged = tamper(await idp.response('alice@example.com'), 'alice@example.com', 'mallory@example.com');
    const { res, token } = await postAssertion(t.app, forged);
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/admin/?signin_error=invalid_assertion');
    expect(token).toBeNull();
    const [event] = await audit('operator.sign_in_refused');
    expect(event).toMatchObject({ action: 'operator.sign_in_refused', actor_key_id: null });
    expect(event!.data).toMatchObject({ method: 'saml', reason: 'invalid_assertion' });
  });

  it('refuses an assertion signed by another key', async () => {
    const other = testSamlIdp(testSigningKeys());
    const { res, token } = await postAssertion(t.app, await other.response('alice@example.com'));
    expect(res.headers.location).toBe('/admin/?signin_error=invalid_assertion');
    expect(token).toBeNull();
  });

  it('refuses a person the identity provider knows but SCIM never provisioned, and names them in the audit', async () => {
    const { res, token } = await postAssertion(t.app, await idp.response('stranger@example.com'));
    expect(res.headers.location).toBe('/admin/?signin_error=not_allowed');
    expect(token).toBeNull();
    const [event] = await audit('operator.sign_in_refused');
    expect(event!.data).toMatchObject({ method: 'saml', reason: 'not_provisioned', user_name: 'stranger@example.com' });
  });

  it('refuses a deactivated operator (SCIM active: false)', async () => {
    const id = await provisionUser(t.app, 'dora@example.com');
    expect((await scim(t.app)('PATCH', `/scim/v2/Users/${id}`, {
      schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'],
      Operations: [{ op: 'replace', value: { active: false } }],
    })).status).toBe(200);
    const { res, token } = await postAssertion(t.app, await idp.response('dora@example.com'));
    expect(res.headers.location).toBe('/admin/?signin_error=not_allowed');
    expect(token).toBeNull();
    const [event] = await audit('operator.sign_in_refused');
    expect(event).toMatchObject({ actor_key_id: id, target_id: id });
    expect(event!.data).toMatchObject({ reason: 'deactivated' });
  });

  it('refuses a post without a SAMLResponse', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/auth/saml/acs', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'RelayState=' });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/admin/?signin_error=invalid_assertion');
  });

  it('sends the browser to the identity provider with an AuthnRequest, and publishes its SP metadata', async () => {
    const login = await t.app.inject({ method: 'GET', url: '/auth/saml/login' });
    expect(login.statusCode).toBe(302);
    const url = new URL(login.headers.location as string);
    expect(`${url.origin}${url.pathname}`).toBe('https://idp.test/sso');
    expect(url.searchParams.get('SAMLRequest')).toBeTruthy();
    const meta = await t.app.inject({ method: 'GET', url: '/auth/saml/metadata' });
    expect(meta.statusCode).toBe(200);
    expect(meta.body).toContain('http://127.0.0.1:8080/auth/saml/acs');
  });

  it('signs out: the session ends, the cookie is cleared, operator.sign_out is audited; the cookie then gets 401', async () => {
    const s = await signInBySaml(t.app, idp, 'alice@example.com');
    const refused = await sessionClient(t.app, s.token, null).post('/auth/sign-out');
    expectError(refused, 403, 'insufficient_scope');
    const out = await s.api.post('/auth/sign-out');
    expect(out.status).toBe(200);
    expect(out.body).toMatchObject({ object: 'svc.operator_session', id: s.session.id, status: 'ended' });
    expect(String(out.headers['set-cookie'])).toMatch(/^svc_session=; Max-Age=0/);
    const [event] = await audit('operator.sign_out');
    expect(event).toMatchObject({ actor_key_id: aliceId, target_id: s.session.id });
    expect(event!.data).toMatchObject({ reason: 'signed_out' });
    expectError(await s.api.get('/auth/session'), 401, 'invalid_api_key');
    expectError(await s.api.gql('{ viewer { keyId } }'), 401, 'invalid_api_key');
  });

  it('lists the sign-in methods the console offers', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/auth/methods' });
    expect(JSON.parse(res.body)).toMatchObject({ object: 'svc.sign_in_methods', methods: ['saml', 'api_key'], idle_timeout_s: 1800, absolute_timeout_s: 43200 });
  });
});
