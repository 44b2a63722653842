import { hash, randomInt, timingSafeEqual } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
export const KEY_PREFIX = 'svc_sk_';

/** `svc_sk_` + 48 base62 characters from the CSPRNG: about 285 bits (CONTRACT §3 asks for at least 238). */
export function generateSecret(): string {
  let out = KEY_PREFIX;
  for (let i = 0; i < 48; i++) out += BASE62[randomInt(62)];
  return out;
}

export function hashSecret(secret: string): string {
  // One-shot (Node ≥ 20.12): no Hash object per authenticated request.
  return hash('sha256', secret, 'hex');
}

export function safeEqualHex(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'hex');
  const bb = Buffer.from(b, 'hex');
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}

/** The redacted form shown on retrieve and list: `svc_sk_...` + the last four characters. */
export const redactSecret = (last4: string): string => `${KEY_PREFIX}...${last4}`;
