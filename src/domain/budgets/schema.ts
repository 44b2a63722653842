import type { Static } from 'typebox';
import { BudgetUsd } from '../keys/schema.ts';
import { Input, ProjectIdField } from '../schema.ts';

/** PUT /v1/projects/{project_id}/budget, GraphQL updateBudget: budget_usd must be given; null removes the budget. */
export const UpdateBudget = Input({
  project_id: ProjectIdField,
  budget_usd: BudgetUsd('The project\'s monthly budget in USD (calendar month, UTC); null removes it.', ', or null to remove the budget'),
});
export type UpdateBudget = Static<typeof UpdateBudget>;
