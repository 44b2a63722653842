/**
 * A valid answer from the OpenID provider that still may not sign in (an unverified e-mail): api/routes/sso.ts audits it with
 * its reason and the name. Its own module, so that sso.ts can recognise it without loading openid-client (oidc.ts is
 * loaded only when OIDC is configured).
 */
export class OidcRefusal extends Error {
  constructor(
    readonly reason: 'email_not_verified',
    readonly userName: string,
  ) {
    super(`the provider has not verified the e-mail ${userName}`);
  }
}
