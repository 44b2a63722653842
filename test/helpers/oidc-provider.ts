import http from 'node:http';
import Provider from 'oidc-provider';
import { freePort } from './ports.ts';

export const OIDC_CLIENT_ID = 'svc-console';
export const OIDC_CLIENT_SECRET = 'svc-console-secret-0123456789abcdefghijklmnop';

export interface TestOidcProvider {
  issuer: string;
  close(): Promise<void>;
}

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * A real OpenID provider (oidc-provider) on loopback, for the gateway's client to sign in against: authorization code
 * with PKCE required, signed ID tokens, discovery. Its login page is a plain form (email only: this provider trusts
 * whoever types, which is what a test needs); submitting it grants the openid, email and profile scopes.
 */
export async function startOidcProvider(
  redirectUris: string | string[],
  opts: { claimsOf?: (sub: string) => Record<string, unknown> } = {},
): Promise<TestOidcProvider> {
  const port = await freePort();
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: OIDC_CLIENT_ID,
        client_secret: OIDC_CLIENT_SECRET,
        redirect_uris: ([] as string[]).concat(redirectUris),
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_post',
      },
    ],
    pkce: { required: () => true },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    // claimsOf: what the provider says of an account (e.g. email_verified false); default a verified e-mail.
    findAccount: async (_ctx, sub) => ({
      accountId: sub,
      claims: async () => ({ sub, ...(opts.claimsOf ? opts.claimsOf(sub) : { email: sub, email_verified: true, name: sub.split('@')[0] }) }),
    }),
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    features: { devInteractions: { enabled: false } },
    cookies: { keys: ['oidc-test-cookie-key-0123456789'] },
    ttl: { Interaction: 600, Grant: 600, Session: 600, AccessToken: 600, IdToken: 600, AuthorizationCode: 60 },
  });
  const callback = provider.callback();

  const server = http.createServer(async (req, res) => {
    const match = /^\/interaction\/([\w-]+)$/.exec(req.url ?? '');
    if (!match) return callback(req, res);
    try {
      const details = await provider.interactionDetails(req, res);
      if (req.method === 'GET') {
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
        return res.end(`<!doctype html><title>Test IdP</title><h1>Test identity provider</h1>
<form method="post" action="/interaction/${escape(match[1]!)}"><label>Email <input name="login" type="email" required></label>
<button type="submit">Continue</button></form>`);
      }
      let body = '';
      for await (const chunk of req) body += chunk;
      const login = new URLSearchParams(body).get('login') ?? '';
      const grant = new provider.Grant({ accountId: login, clientId: String(details.params.client_id) });
      grant.addOIDCScope(String(details.params.scope));
      const grantId = await grant.save();
      await provider.interactionFinished(req, res, { login: { accountId: login }, consent: { grantId } }, { mergeWithLastSubmission: false });
    } catch (err) {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(err));
    }
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    issuer,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Cookies as a browser keeps them for one origin (enough for the provider's interaction cookies). */
class CookieJar {
  private readonly cookies = new Map<string, string>();
  store(setCookie: string[] | string | undefined): void {
    for (const c of ([] as string[]).concat(setCookie ?? [])) {
      const [pair] = c.split(';');
      const [name, ...value] = pair!.split('=');
      if (/max-age=0|expires=Thu, 01 Jan 1970/i.test(c)) this.cookies.delete(name!.trim());
      else this.cookies.set(name!.trim(), value.join('='));
    }
  }
  header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
}

/**
 * Walks a browser's way through the provider: from the gateway's authorization URL to the login form, submits it as
 * `login`, and follows the redirects until the provider sends the browser back to the gateway. Returns that URL.
 */
export async function loginAtProvider(authorizationUrl: string, login: string): Promise<URL> {
  const jar = new CookieJar();
  let url = new URL(authorizationUrl);
  const origin = url.origin;
  let method = 'GET';
  let body: string | undefined;
  for (let hop = 0; hop < 10; hop++) {
    if (url.origin !== origin) return url;
    const res = await fetch(url, {
      method,
      redirect: 'manual',
      headers: { cookie: jar.header(), ...(body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
      body,
    });
    jar.store(res.headers.getSetCookie());
    method = 'GET';
    body = undefined;
    if (res.status >= 300 && res.status < 400) {
      url = new URL(res.headers.get('location')!, url);
      continue;
    }
    const html = await res.text();
    if (res.status === 200 && url.pathname.startsWith('/interaction/')) {
      method = 'POST';
      body = new URLSearchParams({ login }).toString();
      continue;
    }
    throw new Error(`the provider answered ${res.status} at ${url.pathname}: ${html.slice(0, 300)}`);
  }
  throw new Error('too many redirects at the provider');
}
