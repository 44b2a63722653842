import { SAML, ValidateInResponseTo } from '@node-saml/node-saml';
import type { OperatorsConfig } from '../../../config/config.ts';

type SamlSettings = NonNullable<OperatorsConfig['saml']>;

/**
 * SAML 2.0 sign-in with @node-saml/node-saml: an AuthnRequest by HTTP-Redirect, the response by HTTP-POST to the ACS.
 * The assertion must be signed by the configured certificate (xml-crypto checks the signature, node-saml the
 * audience, recipient, and validity window); the NameID is the SCIM userName.
 */
export class SamlSignIn {
  private readonly saml: SAML;

  constructor(
    settings: SamlSettings,
    readonly acsUrl: string,
  ) {
    this.saml = new SAML({
      entryPoint: settings.entryPoint,
      issuer: settings.entityId,
      audience: settings.entityId,
      callbackUrl: acsUrl,
      idpCert: settings.idpCert,
      wantAssertionsSigned: true,
      // The assertion's own signature is what is required; a signed envelope alone is not enough.
      wantAuthnResponseSigned: false,
      validateInResponseTo: ValidateInResponseTo.never,
      disableRequestedAuthnContext: true,
      acceptedClockSkewMs: 5_000,
    });
  }

  authorizeUrl(host: string): Promise<string> {
    return this.saml.getAuthorizeUrlAsync('', host, {});
  }

  /** The NameID of a valid, signed assertion; throws on anything else. */
  async finish(samlResponse: string): Promise<string> {
    const { profile } = await this.saml.validatePostResponseAsync({ SAMLResponse: samlResponse });
    const name = profile?.nameID;
    if (!name) throw new Error('the assertion has no NameID');
    return name;
  }

  metadata(): string {
    return this.saml.generateServiceProviderMetadata(null, null);
  }
}
