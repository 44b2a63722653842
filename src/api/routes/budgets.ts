import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { unixOrNull } from '../../domain/context.ts';
import { getBudget, type ProjectBudget } from '../../domain/budgets/service.ts';
import { UpdateBudget } from '../../domain/budgets/schema.ts';
import { ProjectIdParams } from '../../domain/projects/schema.ts';
import { microsToUsd } from '../../kernel/money.ts';
import { updateBudget } from '../../domain/governance/guarded.ts';
import { Nullable } from '../../domain/schema.ts';
import { UnixOrNull } from '../response-fields.ts';

/** Our budget object: the project's monthly budget and its spend in the current calendar month (UTC). */
export function presentBudget(b: ProjectBudget) {
  return {
    object: 'svc.budget' as const,
    project_id: b.projectId,
    budget_usd: b.budgetMicros === null ? null : microsToUsd(b.budgetMicros),
    spent_usd: microsToUsd(b.spentMicros),
    period: b.period,
    updated_at: unixOrNull(b.updatedAt),
  };
}

/** presentBudget's answer. */
export const BudgetObject = Type.Object(
  {
    object: Type.Literal('svc.budget'),
    project_id: Type.String({ description: 'The project (prj_…).' }),
    budget_usd: Nullable(Type.Number(), { description: 'The monthly budget in USD, or null: none.' }),
    spent_usd: Type.Number({ description: 'The spend in the current calendar month (UTC), in USD.' }),
    period: Type.String({ description: 'The budget\'s period.' }),
    updated_at: UnixOrNull('When the budget was last set'),
  },
  { description: 'A project\'s monthly budget and its spend.' },
);

export const budgetsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.put('/v1/projects/:project_id/budget', { config: { action: 'budget.update' }, schema: { params: ProjectIdParams, body: UpdateBudget, response: { 200: BudgetObject } } }, async (req) =>
    presentBudget(await updateBudget(app.ports.budgets, req.ctx, req.params.project_id, req.body)),
  );

  app.get('/v1/projects/:project_id/budget', { config: { action: 'budget.read' }, schema: { params: ProjectIdParams, response: { 200: BudgetObject } } }, async (req) =>
    presentBudget(await getBudget(app.ports.budgets, req.ctx, req.params.project_id)),
  );
};
