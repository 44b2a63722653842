/** Drops a key from every replica's key cache (in-process LRU, pub/sub behind it) after a revoke or rotate. */
export interface KeyEvictions {
  invalidate(keyId: string): Promise<void>;
}

/** Where a best-effort step that failed is reported (pino's shape). */
export interface WarnLog {
  warn(obj: object, msg: string): void;
}

/** What the key service needs from outside the domain. */
export interface KeyPorts {
  evictions: KeyEvictions;
  log: WarnLog;
}
