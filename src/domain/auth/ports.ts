import type { Db } from '../../db/client.ts';
import type { Clock } from '../../kernel/clock.ts';
import type { WarnLog } from '../keys/ports.ts';

/** What authentication needs: the key rows and their cache, the operator key's digest, a clock and a logger. */
export interface AuthPorts {
  db: Db;
  keys: KeyLookup;
  /** SHA-256 hex of the operator key. */
  masterKeyHash: string;
  clock: Clock;
  log: WarnLog;
}

/** What authentication needs of a key row, cached by secret digest. */
export interface CachedKey {
  id: string;
  projectId: string;
  scopes: string[];
  status: string;
  expiresAt: Date | null;
  secretHash: string;
  previousSecretHash: string | null;
  previousExpiresAt: Date | null;
  lastUsedAt: Date | null;
  /** Monthly budget in micro-dollars; a key's budget is fixed at creation, so the cached value never goes stale. */
  budgetMicros: bigint | null;
  /** CONTRACT §22: the key's model list (empty: every model); a change evicts the key like a revoke. */
  models?: string[];
}

/** The cache of authenticated keys (KeyCache, service.ts): a synchronous hit, or one load for concurrent misses. */
export interface KeyLookup {
  get(hash: string): CachedKey | undefined;
  fetch(hash: string, load: () => Promise<CachedKey | null>): Promise<CachedKey | undefined>;
}
