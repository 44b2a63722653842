import type { BudgetAlert } from '../../domain/budgets/types.ts';

const usd = (n: number) => `$${n.toFixed(2)}`;

/** The alert e-mail's subject and text (the event, written in the same transaction as the spend, is the durable record). */
export function alertMessage(alert: BudgetAlert): { subject: string; text: string } {
  const who = alert.keyId ? `API key ${alert.keyId}` : alert.customer ? `customer ${alert.customer}` : `project ${alert.projectId}`;
  const what =
    alert.type === 'budget.exceeded'
      ? `has reached its monthly budget: further requests are refused with 429 budget_exceeded until the month ends or the budget is raised`
      : `has used ${Math.round(alert.threshold * 100)}% of its monthly budget`;
  return {
    subject: `[svc] ${alert.type === 'budget.exceeded' ? 'Budget exceeded' : `Budget at ${Math.round(alert.threshold * 100)}%`}: ${who} (${alert.period})`,
    text:
      `The ${who} ${what}.\n\n` +
      `Project: ${alert.projectId}\n` +
      (alert.keyId ? `Key: ${alert.keyId}\n` : '') +
      `Period: ${alert.period} (UTC)\n` +
      `Spent: ${usd(alert.spentUsd)} of ${usd(alert.budgetUsd)}\n`,
  };
}
