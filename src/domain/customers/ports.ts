import type { OutcomeFlush } from '../usage/ports.ts';
import type { SpendCounters } from '../budgets/counters.ts';

/** What an inference needs of its end customer (CONTRACT §22): its budget and windows, from the customer cache. */
export interface CustomerPolicy {
  budgetMicros: bigint | null;
  hardStop: boolean;
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
  /** The windows' version: the limits' update time in ms (0: never set). A new version starts them afresh. */
  limitsVersion: number;
}

/** The customers' bounds as the request path reads them (in process, evicted on every replica when they change). */
export interface CustomerPolicies {
  /** The customer's policy; an unknown customer has none (null): only the key's and the project's bounds apply. */
  get(projectId: string, customer: string): Promise<CustomerPolicy | null>;
  /** Evicts here at once, then tells the other replicas. Call after the change has committed. */
  invalidate(projectId: string, customer: string): Promise<void>;
}

/** What the customer service needs from outside the domain. */
export interface CustomerPorts {
  policies: CustomerPolicies;
  counters: Pick<SpendCounters, 'forget'>;
  outcomes: OutcomeFlush;
}
