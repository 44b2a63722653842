import * as oidc from 'openid-client';
import type { OperatorsConfig } from '../../../config/config.ts';
import { OidcRefusal } from './refusal.ts';

type OidcSettings = NonNullable<OperatorsConfig['oidc']>;

/** What the browser's round trip through the provider must bring back (kept sealed in a short-lived cookie). */
export interface PendingOidc {
  state: string;
  nonce: string;
  verifier: string;
  /** ms since the epoch. */
  expiresAt: number;
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|localhost|\[::1\])$/i;

/**
 * OpenID Connect sign-in with openid-client: authorization code with PKCE (S256), state and nonce. The provider is
 * discovered at the first sign-in (not at start: the gateway starts while the provider is down) and again after a
 * failure. A plain-http issuer is accepted only on a loopback host (a provider run locally for tests or trials).
 */
export class OidcSignIn {
  private configuration: Promise<oidc.Configuration> | null = null;

  constructor(
    private readonly settings: OidcSettings,
    readonly redirectUri: string,
  ) {}

  private discovered(): Promise<oidc.Configuration> {
    if (!this.configuration) {
      const issuer = new URL(this.settings.issuer);
      const insecure = issuer.protocol === 'http:' && LOOPBACK.test(issuer.hostname);
      this.configuration = oidc
        .discovery(
          issuer,
          this.settings.clientId,
          this.settings.clientSecret ?? undefined,
          this.settings.clientSecret ? undefined : oidc.None(),
          insecure ? { execute: [oidc.allowInsecureRequests] } : undefined,
        )
        .catch((err: unknown) => {
          this.configuration = null;
          throw err;
        });
    }
    return this.configuration;
  }

  /** The provider's authorization URL and what the callback must check. */
  async start(nowMs: number): Promise<{ url: string; pending: PendingOidc }> {
    const config = await this.discovered();
    const verifier = oidc.randomPKCECodeVerifier();
    const pending: PendingOidc = { state: oidc.randomState(), nonce: oidc.randomNonce(), verifier, expiresAt: nowMs + 10 * 60_000 };
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: this.redirectUri,
      scope: this.settings.scopes,
      response_type: 'code',
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state: pending.state,
      nonce: pending.nonce,
    });
    return { url: url.href, pending };
  }

  /**
   * Exchanges the code (PKCE verifier, state and nonce checked, ID token signature and claims validated by
   * openid-client) and returns the user name claim; read from the UserInfo endpoint when the ID token lacks it. With the
   * `email` claim (the default), the provider must say `email_verified: true`, else OidcRefusal.
   */
  async finish(callbackUrl: URL, pending: PendingOidc): Promise<string> {
    const config = await this.discovered();
    const tokens = await oidc.authorizationCodeGrant(config, callbackUrl, {
      pkceCodeVerifier: pending.verifier,
      expectedState: pending.state,
      expectedNonce: pending.nonce,
      idTokenExpected: true,
    });
    const claims = tokens.claims()!;
    const claim = this.settings.usernameClaim;
    let source: Record<string, unknown> = claims;
    let userInfo: Record<string, unknown> | null = null;
    const fetchUserInfo = async () => (userInfo ??= await oidc.fetchUserInfo(config, tokens.access_token, claims.sub));
    if (claims[claim] === undefined) source = await fetchUserInfo();
    const value = source[claim];
    if (typeof value !== 'string' || value === '') throw new Error(`the ${claim} claim is missing`);
    if (claim === 'email') {
      // An e-mail names an operator only once the provider has verified it: otherwise whoever can type alice's address
      // into a provider account (self-service sign-up, a social login) signs in as alice. email_verified must be the
      // boolean true (OIDC Core 5.1); an ID token that carries the e-mail without it leaves UserInfo to say.
      let verified = source.email_verified;
      if (verified === undefined && source === claims) {
        const info = await fetchUserInfo();
        if (info.email === value) verified = info.email_verified;
      }
      if (verified !== true) throw new OidcRefusal('email_not_verified', value);
    }
    return value;
  }
}
