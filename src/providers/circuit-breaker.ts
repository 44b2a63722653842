import type { Clock } from '../kernel/clock.ts';

export type CircuitState = 'closed' | 'open' | 'half_open';

/**
 * One per provider, per replica. Closed: requests flow and consecutive failures are counted; at the threshold it opens.
 * Open: the provider is skipped until the cool-down (on the injected clock) has passed; then half-open lets exactly one
 * probe through. The probe's success closes the circuit, its failure opens it for another cool-down.
 */
export class CircuitBreaker {
  private state: CircuitState = 'closed';
  private failures = 0;
  private openedAt = 0;
  private probing = false;

  constructor(
    private readonly threshold: number,
    private readonly cooldownMs: number,
    private readonly clock: Clock,
  ) {}

  /** The state as a caller would see it now (an open circuit past its cool-down reads half_open). */
  get current(): CircuitState {
    if (this.state === 'open' && this.clock.now() - this.openedAt >= this.cooldownMs) return 'half_open';
    return this.state;
  }

  /** Whether a request may go to the provider now; a true in half-open makes this request the probe. */
  tryAcquire(): boolean {
    if (this.state === 'closed') return true;
    if (this.state === 'open') {
      if (this.clock.now() - this.openedAt < this.cooldownMs) return false;
      this.state = 'half_open';
    }
    if (this.probing) return false;
    this.probing = true;
    return true;
  }

  onSuccess(): void {
    this.state = 'closed';
    this.failures = 0;
    this.probing = false;
  }

  onFailure(): void {
    this.probing = false;
    if (this.state === 'half_open') {
      this.open();
      return;
    }
    this.failures += 1;
    if (this.state === 'closed' && this.failures >= this.threshold) this.open();
  }

  /** The call ended without a verdict on the provider's health (the client left): let another request probe. */
  release(): void {
    this.probing = false;
  }

  private open(): void {
    this.state = 'open';
    this.openedAt = this.clock.now();
    this.failures = 0;
  }
}
