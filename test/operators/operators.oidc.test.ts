import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, type TestApp } from '../helpers/app.ts';
import { OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, loginAtProvider, startOidcProvider, type TestOidcProvider } from '../helpers/oidc-provider.ts';
import { SP_BASE, provisionUser, sessionClient } from '../helpers/sso.ts';

let t: TestApp;
let provider: TestOidcProvider;
let alice: string;

beforeAll(async () => {
  provider = await startOidcProvider(`${SP_BASE}/auth/oidc/callback`);
  t = await buildTestApp({
    env: {
      SVC_PUBLIC_URL: SP_BASE,
      SVC_OIDC_ISSUER: provider.issuer,
      SVC_OIDC_CLIENT_ID: OIDC_CLIENT_ID,
      SVC_OIDC_CLIENT_SECRET: OIDC_CLIENT_SECRET,
      SVC_SCIM_TOKEN: 'scim-test-token-0123456789abcdefghijklmnopqrstuv',
    },
  });
  alice = await provisionUser(t.app, 'alice@example.com');
}, 180_000);
afterAll(async () => {
  await t?.close();
  await provider?.close();
});

const audit = async (action: string) => (await client(t.app).get('/v1/audit/events', { query: { action, limit: 100 } })).body.data as any[];

/** GET /auth/oidc/start as the browser: the provider's URL and the sealed round-trip cookie. */
async function start() {
  const res = await t.app.inject({ method: 'GET', url: '/auth/oidc/start' });
  expect(res.statusCode).toBe(302);
  const cookie = ([] as string[]).concat(res.headers['set-cookie'] ?? []).find((c) => c.startsWith('svc_oidc='))!;
  return { location: res.headers.location as string, cookie, pair: cookie.split(';')[0]! };
}

async function callback(url: URL, cookiePair: string | null) {
  const res = await t.app.inject({ method: 'GET', url: `${url.pathname}${url.search}`, headers: cookiePair ? { cookie: cookiePair } : {} });
  const session = ([] as string[]).concat(res.headers['set-cookie'] ?? []).map((c) => /^svc_session=([^;]+)/.exec(c)?.[1]).find(Boolean) ?? null;
  return { res, session };
}

describe('OpenID Connect sign-in (openid-client against a local oidc-provider)', () => {
  it('authorization code with PKCE: the provider sends the browser back, the gateway starts a session', async () => {
    const s = await start();
    const auth = new URL(s.location);
    expect(`${auth.origin}${auth.pathname}`).toBe(`${provider.issuer}/auth`);
    expect(auth.searchParams.get('code_challenge_method')).toBe('S256');
    expect(auth.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(auth.searchParams.get('state')).toBeTruthy();
    expect(auth.searchParams.get('nonce')).toBeTruthy();
    expect(auth.searchParams.get('redirect_uri')).toBe(`${SP_BASE}/auth/oidc/callback`);
    expect(s.cookie).toContain('HttpOnly');
    expect(s.cookie).toContain('SameSite=Lax');
    expect(s.cookie).toContain('Path=/auth/oidc');
    // The verifier travels sealed: the cookie does not show it.
    expect(s.cookie).not.toContain('verifier');

    const back = await loginAtProvider(s.location, 'alice@example.com');
    expect(`${back.origin}${back.pathname}`).toBe(`${SP_BASE}/auth/oidc/callback`);
    const { res, session } = await callback(back, s.pair);
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/admin/');
    expect(session).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const info = await sessionClient(t.app, session!, null).get('/auth/session');
    expect(info.body).toMatchObject({ operator: { id: alice, user_name: 'alice@example.com' }, method: 'oidc' });
    const [event] = await audit('operator.sign_in');
    expect(event).toMatchObject({ actor_key_id: alice, target_id: info.body.id });
    expect(event.data).toMatchObject({ method: 'oidc' });

    // The same code again (a replayed redirect) is refused by the provider.
    const again = await callback(back, s.pair);
    expect(again.res.headers.location).toBe('/admin/?signin_error=invalid_response');
    expect(again.session).toBeNull();
  });

  it('refuses a callback without the round-trip cookie (another browser), and one whose state was changed', async () => {
    const s = await start();
    const back = await loginAtProvider(s.location, 'alice@example.com');
    const elsewhere = await callback(back, null);
    expect(elsewhere.res.headers.location).toBe('/admin/?signin_error=expired');
    expect(elsewhere.session).toBeNull();
    expect((await audit('operator.sign_in_refused'))[0].data).toMatchObject({ method: 'oidc', reason: 'no_pending_sign_in' });

    const forged = new URL(back);
    forged.searchParams.set('state', 'not-the-state');
    const changed = await callback(forged, s.pair);
    expect(changed.res.headers.location).toBe('/admin/?signin_error=invalid_response');
    expect(changed.session).toBeNull();
    expect((await audit('operator.sign_in_refused'))[0].data).toMatchObject({ method: 'oidc', reason: 'provider_response_invalid' });
  });

  it('refuses a person the provider knows but SCIM never provisioned', async () => {
    const s = await start();
    const back = await loginAtProvider(s.location, 'zed@example.com');
    const { res, session } = await callback(back, s.pair);
    expect(res.headers.location).toBe('/admin/?signin_error=not_allowed');
    expect(session).toBeNull();
    expect((await audit('operator.sign_in_refused'))[0].data).toMatchObject({ method: 'oidc', reason: 'not_provisioned', user_name: 'zed@example.com' });
  });

  it('offers OIDC among the sign-in methods, and 404s SAML, which is not configured here', async () => {
    expect(JSON.parse((await t.app.inject({ method: 'GET', url: '/auth/methods' })).body).methods).toEqual(['oidc', 'api_key']);
    const saml = await t.app.inject({ method: 'GET', url: '/auth/saml/login' });
    expect(saml.statusCode).toBe(404);
    expect(JSON.parse(saml.body).error.code).toBe('not_found');
  });
});
