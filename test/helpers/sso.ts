import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as samlify from 'samlify';
import type { FastifyInstance } from 'fastify';
import { expect } from 'vitest';

/** A throwaway RSA key and self-signed certificate for a test identity provider (made per run, never committed). */
export function testSigningKeys(): { key: string; cert: string } {
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-idp-'));
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', path.join(dir, 'idp.key'), '-out', path.join(dir, 'idp.crt'),
      '-days', '2', '-subj', '/CN=test-idp'], { stdio: 'pipe' });
    return { key: readFileSync(path.join(dir, 'idp.key'), 'utf8'), cert: readFileSync(path.join(dir, 'idp.crt'), 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export const SAML_ENTRY_POINT = 'https://idp.test/sso';
export const SP_BASE = 'http://127.0.0.1:8080';

/** The gateway's environment for SAML sign-in against `testSamlIdp` (and SCIM with `SCIM_TOKEN`). */
export const SCIM_TOKEN = 'scim-test-token-0123456789abcdefghijklmnopqrstuv';
export function ssoEnv(cert: string, extra: Record<string, string> = {}): Record<string, string> {
  return { SVC_PUBLIC_URL: SP_BASE, SVC_SAML_ENTRY_POINT: SAML_ENTRY_POINT, SVC_SAML_IDP_CERT: cert, SVC_SCIM_TOKEN: SCIM_TOKEN, ...extra };
}

/**
 * A SAML 2.0 identity provider from samlify (IdP mode), signing real assertions with the given key. Its schema
 * validator is a pass-through: it only validates messages it receives, and this IdP receives none.
 */
export function testSamlIdp(keys: { key: string; cert: string }, sp = { base: SP_BASE }) {
  samlify.setSchemaValidator({ validate: async () => 'skipped' });
  const idp = samlify.IdentityProvider({
    entityID: 'https://idp.test/metadata',
    privateKey: keys.key,
    signingCert: keys.cert,
    isAssertionEncrypted: false,
    nameIDFormat: ['urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress'],
    singleSignOnService: [{ Binding: 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect', Location: SAML_ENTRY_POINT }],
  });
  const serviceProvider = samlify.ServiceProvider({
    entityID: `${sp.base}/auth/saml/metadata`,
    wantAssertionsSigned: true,
    assertionConsumerService: [{ Binding: 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST', Location: `${sp.base}/auth/saml/acs` }],
  });
  return {
    /** A base64 SAMLResponse with a signed assertion naming `email`, as the browser would post it. */
    async response(email: string): Promise<string> {
      const { context } = await idp.createLoginResponse(serviceProvider, { extract: { request: { id: `_req${Date.now()}` } } }, 'post', { email });
      return context;
    },
  };
}

/** A SAMLResponse whose signed assertion was changed afterwards: the NameID now names someone else. */
export function tamper(samlResponse: string, from: string, to: string): string {
  const xml = Buffer.from(samlResponse, 'base64').toString('utf8');
  expect(xml).toContain(from);
  return Buffer.from(xml.split(from).join(to), 'utf8').toString('base64');
}

/** Posts a SAMLResponse to the ACS as the browser would; returns the response and the session cookie, if any. */
export async function postAssertion(app: FastifyInstance, samlResponse: string, remoteAddress?: string) {
  const res = await app.inject({
    method: 'POST',
    url: '/auth/saml/acs',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({ SAMLResponse: samlResponse, RelayState: '' }).toString(),
    ...(remoteAddress ? { remoteAddress } : {}),
  });
  const setCookie = ([] as string[]).concat(res.headers['set-cookie'] ?? []);
  const session = setCookie.map((c) => /^svc_session=([^;]*)/.exec(c)?.[1]).find((v) => v);
  return { res, setCookie, token: session ?? null };
}

export interface Res {
  status: number;
  headers: Record<string, unknown>;
  body: any;
  raw: string;
}

const asRes = (r: { statusCode: number; headers: Record<string, unknown>; body: string }): Res => {
  let body: unknown = null;
  try {
    body = r.body ? JSON.parse(r.body) : null;
  } catch {
    body = null;
  }
  return { status: r.statusCode, headers: r.headers, body, raw: r.body };
};

/** SCIM calls as an identity provider sends them (application/scim+json, the bearer token). */
export function scim(app: FastifyInstance, token: string | null = SCIM_TOKEN) {
  return async (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, body?: unknown): Promise<Res> =>
    asRes(
      await app.inject({
        method,
        url,
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { 'content-type': 'application/scim+json' } : {}) },
        payload: body === undefined ? undefined : JSON.stringify(body),
      }),
    );
}

export const USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User';
export const GROUP_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:Group';
export const PATCH_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';

export async function provisionUser(app: FastifyInstance, userName: string): Promise<string> {
  const res = await scim(app)('POST', '/scim/v2/Users', { schemas: [USER_SCHEMA], userName, emails: [{ value: userName, primary: true }], active: true });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

export async function provisionGroup(app: FastifyInstance, displayName: string, members: string[]): Promise<string> {
  const res = await scim(app)('POST', '/scim/v2/Groups', { schemas: [GROUP_SCHEMA], displayName, members: members.map((value) => ({ value })) });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

/** A console session's calls: the cookie, the CSRF token, and X-Svc-Project when given. */
export function sessionClient(app: FastifyInstance, token: string, csrf: string | null, project: string | null = null) {
  const call = async (method: 'GET' | 'POST' | 'PUT', url: string, body?: unknown, headers: Record<string, string> = {}): Promise<Res> =>
    asRes(
      await app.inject({
        method,
        url,
        headers: {
          cookie: `svc_session=${token}`,
          ...(csrf ? { 'x-svc-csrf-token': csrf } : {}),
          ...(project ? { 'x-svc-project': project } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...headers,
        },
        payload: body === undefined ? undefined : JSON.stringify(body),
      }),
    );
  return {
    get: (url: string, headers?: Record<string, string>) => call('GET', url, undefined, headers),
    post: (url: string, body?: unknown, headers?: Record<string, string>) => call('POST', url, body, headers),
    put: (url: string, body?: unknown, headers?: Record<string, string>) => call('PUT', url, body, headers),
    gql: (query: string, variables: Record<string, unknown> = {}) => call('POST', '/graphql', { query, variables }),
    project: (id: string | null) => sessionClient(app, token, csrf, id),
  };
}
export type SessionClient = ReturnType<typeof sessionClient>;

/** Signs in through the SAML IdP and reads the session's CSRF token, as the console does. */
export async function signInBySaml(app: FastifyInstance, idp: ReturnType<typeof testSamlIdp>, userName: string) {
  const { res, token } = await postAssertion(app, await idp.response(userName));
  expect(res.statusCode).toBe(303);
  expect(token).toBeTruthy();
  const info = await sessionClient(app, token!, null).get('/auth/session');
  expect(info.status).toBe(200);
  return { token: token!, csrf: info.body.csrf_token as string, session: info.body, api: sessionClient(app, token!, info.body.csrf_token as string) };
}
