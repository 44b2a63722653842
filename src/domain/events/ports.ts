import type { EgressPolicy } from '../../kernel/egress.ts';
import type { SecretBox } from '../../kernel/secret-box.ts';
import type { LeasedDelivery } from './outbox.ts';

/** Deliveries a batch writes already leased to this process's delivery worker (enqueueEvents with `leaseUntil`). */
export interface DeliveryHandoff {
  /**
   * Asked before writing a batch whose deliveries could be handed over: the lease to write them with, or null (not
   * running, or too many already waiting) to write them unleased for any replica to claim.
   */
  handoffLeaseUntil(now: Date, count: number): Date | null;
  /** Deliveries written leased to this worker (committed): sent as slots free up, before anything claimed. */
  deliverLeased(rows: readonly LeasedDelivery[]): void;
}

/** The webhook delivery worker (src/jobs/webhook-delivery) as the process runs it: main.ts starts and stops it. */
export interface DeliveryWorkerControl extends DeliveryHandoff {
  /** The receiver's deadline. */
  readonly timeoutMs: number;
  /** How long a claim holds a delivery. */
  readonly leaseMs: number;
  start(): Promise<void>;
  /** Stops claiming, lets attempts in flight finish, then releases connections. */
  stop(): Promise<void>;
}

/** What webhooks need process-wide: the secret encryption, the egress guard and the delivery worker (not started). */
export interface WebhookRuntime {
  secretBox: SecretBox;
  egress: EgressPolicy;
  worker: DeliveryWorkerControl;
}
