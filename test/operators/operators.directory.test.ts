import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type TestApp } from '../helpers/app.ts';
import { SAML_ENTRY_POINT, SP_BASE, provisionGroup, provisionUser, scim, signInBySaml, ssoEnv, testSamlIdp, testSigningKeys } from '../helpers/sso.ts';

/**
 * The Operators screen's reads (GraphQL `operators`, `signInSettings`): the operator key's alone, like the groups'
 * roles; they show who SCIM provisioned, their roles per project and last sign-in, and the sign-in configuration
 * without a secret.
 */
const DIRECTORY = `{ operators { id userName displayName email active groups { id displayName } roles { projectId role } lastSignIn { at method } createdAt } }`;
const SETTINGS = `{ signInSettings { oidc { issuer } saml { entryPoint entityId acsUrl metadataUrl } scim { baseUrl } consoleIpAllowlist idleTimeoutS absoluteTimeoutS } }`;

let t: TestApp;
let keys: { key: string; cert: string };
let p1: string;
let p2: string;
let ann: string;
let bob: string;
let admins: string;
let viewers: string;

const operator = () => client(t.app);

beforeAll(async () => {
  keys = testSigningKeys();
  t = await buildTestApp({ env: ssoEnv(keys.cert, { SVC_SESSION_IDLE_TIMEOUT_S: '120', SVC_CONSOLE_IP_ALLOWLIST: '127.0.0.0/8,::1/128' }) });
  p1 = (await seedProject(operator(), { name: 'One' })).projectId;
  p2 = (await seedProject(operator(), { name: 'Two' })).projectId;
  ann = await provisionUser(t.app, 'ann@example.com');
  bob = await provisionUser(t.app, 'bob@example.com');
  admins = await provisionGroup(t.app, 'admins', [ann]);
  viewers = await provisionGroup(t.app, 'viewers', [ann, bob]);
  expect((await operator().put(`/v1/operator-groups/${admins}/roles`, { roles: [{ project_id: p1, role: 'admin' }] })).status).toBe(200);
  expect((await operator().put(`/v1/operator-groups/${viewers}/roles`, { roles: [{ project_id: p1, role: 'viewer' }, { project_id: p2, role: 'viewer' }] })).status).toBe(200);
}, 180_000);
afterAll(async () => {
  await t?.close();
});

describe('GraphQL operators', () => {
  it('lists each operator with its groups, its strongest role per project and its newest sign-in', async () => {
    await signInBySaml(t.app, testSamlIdp(keys), 'ann@example.com');
    // Bob is deprovisioned by SCIM (active: false): still listed, as inactive.
    const off = await scim(t.app)('PATCH', `/scim/v2/Users/${bob}`, {
      schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'],
      Operations: [{ op: 'replace', path: 'active', value: false }],
    });
    expect(off.status).toBe(200);
    const res = await operator().post('/graphql', { query: DIRECTORY });
    expect(res.body.errors).toBeUndefined();
    const byName = Object.fromEntries((res.body.data.operators as any[]).map((o) => [o.userName, o]));
    expect(byName['ann@example.com']).toMatchObject({
      id: ann,
      email: 'ann@example.com',
      active: true,
      groups: [{ id: admins, displayName: 'admins' }, { id: viewers, displayName: 'viewers' }].sort((a, b) => a.id.localeCompare(b.id)),
      roles: [{ projectId: p1, role: 'admin' }, { projectId: p2, role: 'viewer' }].sort((a, b) => a.projectId.localeCompare(b.projectId)),
      lastSignIn: { at: Math.floor(t.clock.now() / 1000), method: 'saml' },
    });
    expect(byName['bob@example.com']).toMatchObject({ id: bob, active: false, lastSignIn: null });
  });

  it('is refused to a project key and to a console session (insufficient_scope)', async () => {
    const key = await seedProject(operator(), { scopes: ['governance:manage'] });
    const asKey = await client(t.app, key.secret).post('/graphql', { query: DIRECTORY });
    expect(asKey.body.data).toBeNull();
    expect(asKey.body.errors[0].extensions).toMatchObject({ code: 'insufficient_scope', http_status: 403 });
    const s = await signInBySaml(t.app, testSamlIdp(keys), 'ann@example.com');
    const asSession = await s.api.project(p1).gql(DIRECTORY);
    expect(asSession.body.errors[0].extensions).toMatchObject({ code: 'insufficient_scope', http_status: 403 });
    const settings = await client(t.app, key.secret).post('/graphql', { query: SETTINGS });
    expect(settings.body.errors[0].extensions).toMatchObject({ code: 'insufficient_scope', http_status: 403 });
  });
});

describe('GraphQL signInSettings', () => {
  it('names what is configured, without a secret', async () => {
    const res = await operator().post('/graphql', { query: SETTINGS });
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data.signInSettings).toEqual({
      oidc: null,
      saml: { entryPoint: SAML_ENTRY_POINT, entityId: `${SP_BASE}/auth/saml/metadata`, acsUrl: `${SP_BASE}/auth/saml/acs`, metadataUrl: `${SP_BASE}/auth/saml/metadata` },
      scim: { baseUrl: `${SP_BASE}/scim/v2` },
      consoleIpAllowlist: ['127.0.0.0/8', '::1/128'],
      idleTimeoutS: 120,
      absoluteTimeoutS: expect.any(Number),
    });
    // Neither the IdP certificate nor the SCIM token is anywhere in the answer.
    expect(JSON.stringify(res.body)).not.toContain('BEGIN CERTIFICATE');
    expect(JSON.stringify(res.body)).not.toContain('scim-test-token');
  });

  it('says null where a method is not configured', async () => {
    const bare = await buildTestApp({});
    try {
      const res = await client(bare.app).post('/graphql', { query: SETTINGS });
      expect(res.body.data.signInSettings).toMatchObject({ oidc: null, saml: null, scim: null, consoleIpAllowlist: [] });
    } finally {
      await bare.close();
    }
  });
});
