/** A budget threshold a committed spend crossed (applySpend): its event is written with the spend, its e-mail after. */
export interface BudgetAlert {
  type: 'budget.threshold' | 'budget.exceeded';
  keyId: string | null;
  /** CONTRACT §22: set when the budget is an end customer's. */
  customer?: string;
  projectId: string;
  budgetUsd: number;
  spentUsd: number;
  threshold: number;
  period: string;
}
