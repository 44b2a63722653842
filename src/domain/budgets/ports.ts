import type { BudgetAlert } from './types.ts';

/** The e-mails of the alerts a committed batch fired (src/jobs/budget-alerts): best effort, off the request path. */
export interface BudgetAlertSender {
  send(alerts: readonly BudgetAlert[]): void;
  /** Resolves once the e-mails handed over so far are sent or given up (shutdown, tests). */
  settled(): Promise<void>;
}
