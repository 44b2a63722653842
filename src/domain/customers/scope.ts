/** The budget scope of an end customer (budget_spend.scope, the spend counter's name): customer ids are per project. */
export const customerScope = (projectId: string, customer: string): string => `customer:${projectId}:${customer}`;

/** An inference's end customer, as the budget check and the spend charge take it (CONTRACT §22). */
export interface BudgetedCustomer {
  id: string;
  /** null: no budget of its own. */
  budgetMicros: bigint | null;
  /** false: the budget only alerts (no 429). */
  hardStop: boolean;
}
