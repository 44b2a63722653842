/** A budget threshold a committed spend crossed (applySpend): its event is written with the spend, its e-mail after. */
export interface BudgetAlert {
  type: 'budget.threshold' | 'budget.exceeded';
  keyId: string | null;
  projectId: string;
  budgetUsd: number;
  spentUsd: number;
  threshold: number;
  period: string;
}
