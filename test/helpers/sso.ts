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
