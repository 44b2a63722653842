import { request } from 'undici';
import { expect } from 'vitest';
import { startGateway, type GatewayProcess } from './gateway-process.ts';
import { SCIM_TOKEN, USER_SCHEMA, type testSamlIdp } from './sso.ts';

/**
 * Calls to gateway processes (test/helpers/gateway-process.ts) that are not JSON with a bearer key: the SAML ACS form
 * post, SCIM (application/scim+json), and a console session's cookie calls. For the tests that run gateways as
 * separate processes (test/scale/*): what a browser or an identity provider sends, over HTTP.
 */
export interface RawAnswer {
  status: number;
  headers: Record<string, string | string[]>;
  body: any;
}

export async function rawCall(
  g: Pick<GatewayProcess, 'baseUrl'>,
  method: string,
  path: string,
  opts: { headers?: Record<string, string>; body?: string } = {},
): Promise<RawAnswer> {
  const res = await request(g.baseUrl + path, {
    method: method as 'GET',
    headers: opts.headers,
    body: opts.body,
    signal: AbortSignal.timeout(15_000),
  });
  const text = await res.body.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: kept as text
  }
  return { status: res.statusCode, headers: res.headers as Record<string, string | string[]>, body };
}

/** SCIM as an identity provider sends it to one process. */
export function scimOf(g: Pick<GatewayProcess, 'baseUrl'>) {
  return (method: string, path: string, body?: unknown) =>
    rawCall(g, method, path, {
      headers: { authorization: `Bearer ${SCIM_TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/scim+json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
}

export async function provisionOperator(g: Pick<GatewayProcess, 'baseUrl'>, userName: string): Promise<string> {
  const res = await scimOf(g)('POST', '/scim/v2/Users', { schemas: [USER_SCHEMA], userName, emails: [{ value: userName, primary: true }], active: true });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

/** A console session on one process: the cookie and the CSRF token the page would hold. */
export interface ProcessSession {
  token: string;
  csrf: string;
  /** A call with the session's cookie and CSRF token, to any process. */
  call(g: Pick<GatewayProcess, 'baseUrl'>, method: string, path: string, body?: unknown): Promise<RawAnswer>;
}

/** Signs in on `g` through the SAML IdP (the browser's form post to the ACS), and reads the CSRF token. */
export async function signInOn(g: Pick<GatewayProcess, 'baseUrl'>, idp: ReturnType<typeof testSamlIdp>, userName: string): Promise<ProcessSession> {
  const acs = await rawCall(g, 'POST', '/auth/saml/acs', {
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ SAMLResponse: await idp.response(userName), RelayState: '' }).toString(),
  });
  expect(acs.status).toBe(303);
  const token = ([] as string[])
    .concat(acs.headers['set-cookie'] ?? [])
    .map((c) => /^svc_session=([^;]*)/.exec(c)?.[1])
    .find((v) => v);
  expect(token).toBeTruthy();
  const call = (to: Pick<GatewayProcess, 'baseUrl'>, method: string, path: string, body?: unknown, csrf?: string) =>
    rawCall(to, method, path, {
      headers: {
        cookie: `svc_session=${token}`,
        ...(csrf ? { 'x-svc-csrf-token': csrf } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const info = await call(g, 'GET', '/auth/session');
  expect(info.status).toBe(200);
  const csrf = info.body.csrf_token as string;
  return { token: token!, csrf, call: (to, method, path, body) => call(to, method, path, body, csrf) };
}

/** Resident set sizes (MB) of the given processes, by label. */
export function rssOf(processes: Record<string, Pick<GatewayProcess, 'rssMb'>>): Record<string, number> {
  return Object.fromEntries(Object.entries(processes).map(([k, g]) => [k, g.rssMb()]));
}

/**
 * Starts a gateway of the deployment (test/system/replicas/support.ts) allowing `timeoutMs` to reach /healthz: the
 * scale tests start several processes at once on a shared 2-core machine, where one cold start can pass a minute.
 */
export async function startReplica(
  d: { env: Record<string, string>; gateways: GatewayProcess[] },
  extraEnv: Record<string, string> = {},
  timeoutMs = 180_000,
): Promise<GatewayProcess> {
  const g = await startGateway({ ...d.env, ...extraEnv }, { timeoutMs });
  d.gateways.push(g);
  return g;
}
