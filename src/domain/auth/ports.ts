import type { Db } from '../../db/client.ts';
import type { Clock } from '../../kernel/clock.ts';
import type { WarnLog } from '../keys/ports.ts';
import type { KeyCache } from './key-cache.ts';

/** What authentication needs: the key rows and their cache, the operator key's digest, a clock and a logger. */
export interface AuthPorts {
  db: Db;
  keys: Pick<KeyCache, 'get' | 'fetch'>;
  /** SHA-256 hex of the operator key. */
  masterKeyHash: string;
  clock: Clock;
  log: WarnLog;
}
