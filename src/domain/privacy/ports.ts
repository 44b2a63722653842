import type { ProjectEvictions } from '../projects/ports.ts';
import type { OutcomeFlush } from '../usage/ports.ts';

/** Encryption at rest of retained content (the webhook secret box: AES-256-GCM, bound to the inference id). */
export interface ContentSealer {
  seal(plaintext: string, aad: string): string;
  open(sealed: string, aad: string): string;
}

/** What the inference pipeline needs for PII redaction and retention (CONTRACT §11, §12). */
export interface InferencePrivacyPorts {
  sealer: ContentSealer;
  /** SVC_PII_TIMEOUT_MS. */
  piiTimeoutMs: number;
  /** A monotonic clock in ms for the redaction deadline (tests inject one that jumps). */
  monotonicNow: () => number;
}

/** What the privacy services need: the project cache's evictions, the sealer, read-your-writes of retained records. */
export interface PrivacyPorts {
  projects: ProjectEvictions;
  sealer: ContentSealer;
  outcomes: OutcomeFlush;
}
