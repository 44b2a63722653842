import { SvcError } from '../../errors/svc-error.ts';
import type { CachedKey } from './key-cache.ts';
import type { Caller } from '../context.ts';
import type { AuthPorts } from './ports.ts';
import { SCOPES, type Scope } from '../keys/scopes.ts';
import { KEY_PREFIX, digestEquals, digestSecret } from '../keys/secrets.ts';

export const OPERATOR_KEY_ID = 'key_master';

/**
 * The caller a key row acts as: on a request (authenticate), and in the background work done as the key that asked
 * (batches, evaluations, the verticals, RAG indexing, approved changes). Its model list rides along (CONTRACT §22).
 */
export function keyCaller(key: { id: string; projectId: string; scopes: readonly string[]; budgetMicros: bigint | null; models?: readonly string[] | null }): Caller {
  return {
    kind: 'key',
    keyId: key.id,
    projectId: key.projectId,
    scopes: key.scopes as Scope[],
    budgetMicros: key.budgetMicros,
    models: key.models && key.models.length > 0 ? key.models : null,
  };
}

const invalidKey = () => new SvcError('invalid_api_key');
const LAST_USED_RESOLUTION_MS = 60_000;

/** Parses `Authorization: Bearer svc_sk_…`; anything else is 401 invalid_api_key. */
export function bearerSecret(header: string | undefined): string {
  if (!header) throw new SvcError('invalid_api_key', { message: 'No API key: send Authorization: Bearer <API_KEY>.' });
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match || !match[1]!.startsWith(KEY_PREFIX) || match[1]!.length > 200) throw invalidKey();
  return match[1]!;
}

/**
 * Resolves a secret to its caller. Secrets are compared by SHA-256 digest: the database finds the row by the digest's
 * unique index, and the digest is compared again in constant time. Revoked, expired and past-overlap secrets are 401.
 */
export async function authenticate(ports: AuthPorts, header: string | undefined): Promise<Caller> {
  const secret = bearerSecret(header);
  const digest = digestSecret(secret);
  const hash = digest.hex;
  if (digestEquals(digest.bytes, ports.masterKeyHash)) {
    return { kind: 'operator', keyId: OPERATOR_KEY_ID, projectId: null, scopes: SCOPES };
  }
  const now = ports.clock.now();
  // A hit is synchronous (no promise on the hot path); a miss loads once for every request asking at the same time.
  // Only active keys are cached: unknown secrets must not be able to fill the cache.
  const key: CachedKey | undefined = ports.keys.get(hash) ?? (await ports.keys.fetch(hash, () => loadKey(ports, hash)));
  if (!key || key.status !== 'active') throw invalidKey();
  if (key.expiresAt && key.expiresAt.getTime() <= now) throw invalidKey();
  const current = digestEquals(digest.bytes, key.secretHash);
  const previous =
    !current &&
    key.previousSecretHash !== null &&
    digestEquals(digest.bytes, key.previousSecretHash) &&
    key.previousExpiresAt !== null &&
    key.previousExpiresAt.getTime() > now;
  if (!current && !previous) throw invalidKey();

  if (!key.lastUsedAt || now - key.lastUsedAt.getTime() > LAST_USED_RESOLUTION_MS) {
    // Best effort and off the request's critical path; minute resolution keeps it from writing on every call.
    key.lastUsedAt = new Date(now);
    ports.db.apiKey
      .update({ where: { id: key.id }, data: { lastUsedAt: new Date(now) } })
      .catch((err: unknown) => ports.log.warn({ err, keyId: key.id }, 'could not record last_used_at'));
  }
  return keyCaller(key);
}

function loadKey(ports: AuthPorts, hash: string): Promise<CachedKey | null> {
  return ports.db.apiKey.findFirst({
    where: { OR: [{ secretHash: hash }, { previousSecretHash: hash }] },
    select: {
      id: true,
      projectId: true,
      scopes: true,
      status: true,
      expiresAt: true,
      secretHash: true,
      previousSecretHash: true,
      previousExpiresAt: true,
      lastUsedAt: true,
      budgetMicros: true,
      models: true,
    },
  });
}
