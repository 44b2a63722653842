import { getBudget, type ProjectBudget } from '../domain/budgets/service.ts';
import { microsToUsd } from '../kernel/money.ts';
import { serviceInput } from './inputs.ts';
import { builder } from './builder.ts';
import { updateBudget } from '../domain/governance/guarded.ts';

/** REST's svc.budget object: the project's monthly budget and this calendar month's spend (UTC). */
export const BudgetRef = builder.objectRef<ProjectBudget>('Budget').implement({
  fields: (t) => ({
    projectId: t.exposeID('projectId'),
    budgetUsd: t.float({
      nullable: true,
      description: 'null: no project budget.',
      resolve: (b) => (b.budgetMicros === null ? null : microsToUsd(b.budgetMicros)),
    }),
    spentUsd: t.float({ resolve: (b) => microsToUsd(b.spentMicros) }),
    period: t.exposeString('period', { description: 'YYYY-MM (UTC).' }),
    updatedAt: t.expose('updatedAt', { type: 'UnixSeconds', nullable: true }),
  }),
});

builder.queryField('budget', (t) =>
  t.field({
    type: BudgetRef,
    nullable: true,
    authScopes: { action: 'budget.read' },
    args: { projectId: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx, ports }) => getBudget(ports.budgets, ctx, String(args.projectId)),
  }),
);

builder.mutationField('updateBudget', (t) =>
  t.field({
    type: BudgetRef,
    nullable: true,
    authScopes: { action: 'budget.update' },
    description: 'budgetUsd null removes the budget; the argument must be given. Audits and emits policy.updated.',
    args: { projectId: t.arg.id({ required: true }), budgetUsd: t.arg.float() },
    // Absent and null differ, as in REST's body: absent is 400 invalid_request, null removes the budget.
    resolve: (_root, { projectId, ...input }, { ctx, ports }) => updateBudget(ports.budgets, ctx, String(projectId), serviceInput(input)),
  }),
);
