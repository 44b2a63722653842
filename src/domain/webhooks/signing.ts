import { createHmac, randomBytes } from 'node:crypto';

/** CONTRACT §6: `whsec_` + random; 32 bytes from a CSPRNG (256 bits). */
export const SIGNING_SECRET_PREFIX = 'whsec_';

export function generateSigningSecret(): string {
  return SIGNING_SECRET_PREFIX + randomBytes(32).toString('base64url');
}

/**
 * X-Svc-Signature, exactly Stripe's scheme (CONTRACT §6): `t=<unix seconds>,v1=<hex HMAC-SHA256 over "<t>.<raw body>">`,
 * keyed with the whole secret string (prefix included, as stripe-node's verifier does), so a receiver can verify with
 * `stripe.webhooks.constructEvent(rawBody, header, secret)`.
 */
export function signatureHeader(secret: string, rawBody: string, timestampS: number): string {
  const t = Math.floor(timestampS);
  const v1 = createHmac('sha256', secret).update(`${t}.${rawBody}`, 'utf8').digest('hex');
  return `t=${t},v1=${v1}`;
}
