import { getCustomer, listCustomers, type CustomerView } from '../domain/customers/service.ts';
import { updateCustomerBudget, updateCustomerRateLimits } from '../domain/governance/guarded.ts';
import { microsToUsd } from '../kernel/money.ts';
import { builder } from './builder.ts';
import { serviceConnection } from './connections.ts';
import { serviceInput } from './inputs.ts';

/** REST's svc.customer (CONTRACT §22): an end customer of a project, its bounds and this month's spend. */
export const CustomerRef = builder.objectRef<CustomerView>('Customer').implement({
  description: 'An end customer of a project, as inferences name it (user, metadata.user_id or X-Svc-Customer).',
  fields: (t) => ({
    id: t.exposeID('customer', { description: 'The customer\'s id.' }),
    projectId: t.exposeID('projectId'),
    budgetUsd: t.float({ nullable: true, description: 'null: no budget of its own.', resolve: (c) => (c.budgetMicros === null ? null : microsToUsd(c.budgetMicros)) }),
    hardStop: t.exposeBoolean('hardStop', { description: 'Whether the budget refuses inferences (429 budget_exceeded) or only alerts.' }),
    spentUsd: t.float({ resolve: (c) => microsToUsd(c.spentMicros) }),
    period: t.exposeString('period', { description: 'YYYY-MM (UTC).' }),
    requestsPerMinute: t.exposeInt('requestsPerMinute', { nullable: true, description: 'null: no request window of its own.' }),
    tokensPerMinute: t.exposeInt('tokensPerMinute', { nullable: true, description: 'null: no token window of its own.' }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    updatedAt: t.expose('updatedAt', { type: 'UnixSeconds', nullable: true }),
  }),
});

builder.queryFields((t) => ({
  customer: t.field({
    type: CustomerRef,
    nullable: true,
    authScopes: { action: 'customer.read' },
    description: 'GET /v1/projects/{id}/customers/{customer}.',
    args: { projectId: t.arg.id({ required: true }), customer: t.arg.string({ required: true }) },
    resolve: (_root, args, { ctx, ports }) => getCustomer(ports.customers, ctx, String(args.projectId), args.customer),
  }),
  customers: t.connection(
    {
      type: CustomerRef,
      nullable: true,
      authScopes: { action: 'customer.list' },
      description: 'GET /v1/projects/{id}/customers: newest (first seen) first; cursors are customer ids.',
      args: { projectId: t.arg.id({ required: true }) },
      resolve: (_root, args, { ctx, ports }) =>
        serviceConnection(
          args,
          (query) => listCustomers(ports.customers, ctx, String(args.projectId), query),
          (c: CustomerView) => c.customer,
        ),
    },
    { name: 'CustomerConnection' },
    { name: 'CustomerEdge' },
  ),
}));

builder.mutationFields((t) => ({
  updateCustomerBudget: t.field({
    type: CustomerRef,
    nullable: true,
    authScopes: { action: 'customer.budget.update' },
    description: 'PUT …/customers/{customer}/budget: budgetUsd null removes the budget (the argument must be given). Emits policy.updated.',
    args: { projectId: t.arg.id({ required: true }), customer: t.arg.string({ required: true }), budgetUsd: t.arg.float(), hardStop: t.arg.boolean() },
    resolve: (_root, { projectId, customer, ...input }, { ctx, ports }) =>
      updateCustomerBudget(ports.customers, ctx, String(projectId), customer, serviceInput(input)),
  }),
  updateCustomerRateLimits: t.field({
    type: CustomerRef,
    nullable: true,
    authScopes: { action: 'customer.rate_limits.update' },
    description: 'PUT …/customers/{customer}/rate-limits: both arguments must be given; null is no window. Emits policy.updated.',
    args: {
      projectId: t.arg.id({ required: true }),
      customer: t.arg.string({ required: true }),
      requestsPerMinute: t.arg.int(),
      tokensPerMinute: t.arg.int(),
    },
    resolve: (_root, { projectId, customer, ...input }, { ctx, ports }) =>
      updateCustomerRateLimits(ports.customers, ctx, String(projectId), customer, serviceInput(input)),
  }),
}));
