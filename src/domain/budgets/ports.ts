import type { OutcomeFlush } from '../usage/ports.ts';
import type { ProjectEvictions, ProjectReader } from '../projects/ports.ts';
import type { SpendCounters } from './counters.ts';
import type { BudgetAlert } from './types.ts';
import type { CustomerPolicies } from '../customers/ports.ts';

/** The e-mails of the alerts a committed batch fired (src/jobs/budget-alerts): best effort, off the request path. */
export interface BudgetAlertSender {
  send(alerts: readonly BudgetAlert[]): void;
  /** Resolves once the e-mails handed over so far are sent or given up (shutdown, tests). */
  settled(): Promise<void>;
}

/** What the budget service needs from outside the domain: the month counters, the project cache, read-your-writes. */
export interface BudgetPorts {
  counters: Pick<SpendCounters, 'read' | 'add' | 'forget'>;
  projects: ProjectReader & ProjectEvictions;
  outcomes: OutcomeFlush;
  /** CONTRACT §22: the end customers' bounds (the customer cache); absent: customers are named, never bounded. */
  customers?: Pick<CustomerPolicies, 'get'>;
}
