import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { ConfigError } from '../../src/config/environment.ts';
import { CidrList, isCidr } from '../../src/kernel/cidr.ts';

const CERT = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

function refusal(env: Record<string, string>): { variable: string; message: string } {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return { variable: (err as ConfigError).variable, message: (err as Error).message };
  }
  throw new Error('the configuration was accepted');
}

describe('operators configuration (issue 22)', () => {
  it('defaults: no SSO, no SCIM, 30 min idle, 12 h absolute, any address', () => {
    const c = loadConfig({}).operators;
    expect(c).toMatchObject({ oidc: null, saml: null, scimTokenHash: null, idleTimeoutMs: 1_800_000, absoluteTimeoutMs: 43_200_000, consoleAllowlist: [] });
  });

  it('names the variable that is wrong or missing', () => {
    expect(refusal({ SVC_OIDC_ISSUER: 'https://idp.example.com' }).variable).toBe('SVC_PUBLIC_URL');
    expect(refusal({ SVC_OIDC_ISSUER: 'https://idp.example.com', SVC_PUBLIC_URL: 'https://svc.example.com' }).variable).toBe('SVC_OIDC_CLIENT_ID');
    expect(refusal({ SVC_OIDC_ISSUER: 'ftp://idp', SVC_PUBLIC_URL: 'https://svc.example.com' }).variable).toBe('SVC_OIDC_ISSUER');
    expect(refusal({ SVC_SAML_ENTRY_POINT: 'https://idp/sso', SVC_PUBLIC_URL: 'https://svc.example.com' }).variable).toBe('SVC_SAML_IDP_CERT');
    expect(refusal({ SVC_SAML_ENTRY_POINT: 'https://idp/sso', SVC_PUBLIC_URL: 'https://svc.example.com', SVC_SAML_IDP_CERT: '/nonexistent.pem' }).variable).toBe('SVC_SAML_IDP_CERT');
    expect(refusal({ SVC_SCIM_TOKEN: 'short' }).variable).toBe('SVC_SCIM_TOKEN');
    expect(refusal({ SVC_SCIM_TOKEN_SHA256: 'abc' }).variable).toBe('SVC_SCIM_TOKEN_SHA256');
    expect(refusal({ SVC_CONSOLE_IP_ALLOWLIST: '10.0.0.0/8,intranet' }).message).toBe('SVC_CONSOLE_IP_ALLOWLIST: "intranet" is not an IP address or CIDR; use comma-separated IPs or CIDRs');
    expect(refusal({ SVC_SESSION_IDLE_TIMEOUT_S: '7200', SVC_SESSION_ABSOLUTE_TIMEOUT_S: '3600' }).variable).toBe('SVC_SESSION_IDLE_TIMEOUT_S');
    expect(refusal({ SVC_SESSION_IDLE_TIMEOUT_S: 'soon' }).variable).toBe('SVC_SESSION_IDLE_TIMEOUT_S');
  });

  it('keeps only the SCIM token digest, and takes a digest instead', () => {
    const c = loadConfig({ SVC_SCIM_TOKEN: 'x'.repeat(40) }).operators;
    expect(c.scimTokenHash).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(c)).not.toContain('x'.repeat(40));
    expect(loadConfig({ SVC_SCIM_TOKEN_SHA256: 'A'.repeat(64) }).operators.scimTokenHash).toBe('a'.repeat(64));
  });

  it('leaves Secure off the cookie only for plain-http loopback outside production', () => {
    const saml = { SVC_SAML_ENTRY_POINT: 'https://idp/sso', SVC_SAML_IDP_CERT: CERT };
    expect(loadConfig({ ...saml, SVC_PUBLIC_URL: 'http://127.0.0.1:8080' }).operators.secureCookie).toBe(false);
    expect(loadConfig({ ...saml, SVC_PUBLIC_URL: 'http://localhost:8080' }).operators.secureCookie).toBe(false);
    expect(loadConfig({ ...saml, SVC_PUBLIC_URL: 'http://127.0.0.1:8080', NODE_ENV: 'production' }).operators.secureCookie).toBe(true);
    expect(loadConfig({ ...saml, SVC_PUBLIC_URL: 'http://svc.internal:8080' }).operators.secureCookie).toBe(true);
    expect(loadConfig({ ...saml, SVC_PUBLIC_URL: 'https://svc.example.com' }).operators.secureCookie).toBe(true);
    expect(loadConfig({ ...saml, SVC_PUBLIC_URL: 'http://127.0.0.1.evil.example:8080' }).operators.secureCookie).toBe(true);
    expect(loadConfig({ ...saml, SVC_PUBLIC_URL: 'https://svc.example.com' }).operators.saml).toMatchObject({ entityId: 'https://svc.example.com/auth/saml/metadata' });
  });
});

describe('CidrList', () => {
  it('matches IPv4, IPv6 and IPv4-mapped addresses; empty allows all; garbage is refused', () => {
    const list = new CidrList(['10.0.0.0/8', '192.0.2.7', '2001:db8::/32', '::ffff:172.16.0.0/108']);
    expect(list.allows('10.255.0.1')).toBe(true);
    expect(list.allows('::ffff:10.1.2.3')).toBe(true);
    expect(list.allows('192.0.2.7')).toBe(true);
    expect(list.allows('192.0.2.8')).toBe(false);
    expect(list.allows('2001:db8::1')).toBe(true);
    expect(list.allows('2001:db9::1')).toBe(false);
    expect(list.allows('172.16.3.4')).toBe(true);
    expect(list.allows('127.0.0.1')).toBe(false);
    expect(list.allows(null)).toBe(false);
    expect(list.allows('not an ip')).toBe(false);
    expect(new CidrList([]).allows('203.0.113.9')).toBe(true);
    expect(isCidr('10.0.0.0/33')).toBe(false);
    expect(isCidr('10.0.0.0/8')).toBe(true);
    expect(isCidr('10.0.0.0/')).toBe(false);
    expect(() => new CidrList(['nope'])).toThrow('"nope" is not an IP address or CIDR');
  });
});
