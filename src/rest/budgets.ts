import type { FastifyPluginAsync } from 'fastify';
import { unixOrNull } from '../domain/context.ts';
import { getBudget, microsToUsd, type ProjectBudget, type UpdateBudgetInput } from '../domain/budgets/service.ts';
import { updateBudget } from '../domain/governance/guarded.ts';

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

const ProjectIdParams = {
  type: 'object',
  properties: { project_id: { type: 'string' } },
  required: ['project_id'],
} as const;

export const budgetsRoutes: FastifyPluginAsync = async (app) => {
  app.put<{ Params: { project_id: string }; Body: UpdateBudgetInput }>(
    '/v1/projects/:project_id/budget',
    {
      schema: {
        params: ProjectIdParams,
        body: { type: 'object', additionalProperties: false, required: ['budget_usd'], properties: { project_id: { type: ['string', 'null'] }, budget_usd: {} } },
      },
    },
    async (req) => presentBudget(await updateBudget(app.ports.budgets, req.ctx, req.params.project_id, req.body)),
  );

  app.get<{ Params: { project_id: string } }>(
    '/v1/projects/:project_id/budget',
    { schema: { params: ProjectIdParams } },
    async (req) => presentBudget(await getBudget(app.ports.budgets, req.ctx, req.params.project_id)),
  );
};
