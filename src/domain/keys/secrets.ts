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

/** The secret's SHA-256 digest as bytes (compare with digestEquals) and as the hex stored in the database. */
export function digestSecret(secret: string): { bytes: Buffer; hex: string } {
  const bytes = hash('sha256', secret, 'buffer');
  return { bytes, hex: bytes.toString('hex') };
}

/** Stored digests decoded once (the master key's and the cached keys' are compared on every request); bounded. */
const decoded = new Map<string, Buffer>();
const MAX_DECODED = 10_000;

/** Constant-time: `bytes` against a stored hex digest. */
export function digestEquals(bytes: Buffer, hex: string): boolean {
  let other = decoded.get(hex);
  if (!other) {
    other = Buffer.from(hex, 'hex');
    if (decoded.size >= MAX_DECODED) decoded.clear();
    decoded.set(hex, other);
  }
  return other.length === bytes.length && timingSafeEqual(bytes, other);
}

export function safeEqualHex(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'hex');
  const bb = Buffer.from(b, 'hex');
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}

/** The redacted form shown on retrieve and list: `svc_sk_...` + the last four characters. */
export const redactSecret = (last4: string): string => `${KEY_PREFIX}...${last4}`;
