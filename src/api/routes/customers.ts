import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { unixOrNull, unixSeconds } from '../../domain/context.ts';
import { getCustomer, listCustomers, type CustomerView } from '../../domain/customers/service.ts';
import { CustomerListQuery, CustomerParams, UpdateCustomerBudget, UpdateCustomerRateLimits } from '../../domain/customers/schema.ts';
import { updateCustomerBudget, updateCustomerRateLimits } from '../../domain/governance/guarded.ts';
import { ProjectIdParams } from '../../domain/projects/schema.ts';
import { microsToUsd } from '../../kernel/money.ts';
import { Nullable } from '../../domain/schema.ts';
import { ListOf, sendList } from '../list.ts';
import { Unix, UnixOrNull } from '../response-fields.ts';

/** CONTRACT §22: an end customer of a project, its bounds and its spend in the current calendar month (UTC). */
export function presentCustomer(c: CustomerView) {
  return {
    id: c.customer,
    object: 'svc.customer' as const,
    project_id: c.projectId,
    budget_usd: c.budgetMicros === null ? null : microsToUsd(c.budgetMicros),
    hard_stop: c.hardStop,
    spent_usd: microsToUsd(c.spentMicros),
    period: c.period,
    rate_limits: { requests_per_minute: c.requestsPerMinute, tokens_per_minute: c.tokensPerMinute },
    created_at: unixSeconds(c.createdAt),
    updated_at: unixOrNull(c.updatedAt),
  };
}

/** presentCustomer's answer. */
export const CustomerObject = Type.Object(
  {
    id: Type.String({ description: 'The customer\'s id, as inferences name it (user, metadata.user_id or X-Svc-Customer).' }),
    object: Type.Literal('svc.customer'),
    project_id: Type.String({ description: 'The project (prj_…).' }),
    budget_usd: Nullable(Type.Number(), { description: 'The customer\'s monthly budget in USD, or null: none.' }),
    hard_stop: Type.Boolean({ description: 'Whether the budget refuses inferences (429 budget_exceeded) or only alerts.' }),
    spent_usd: Type.Number({ description: 'The customer\'s spend in the current calendar month (UTC), in USD.' }),
    period: Type.String({ description: 'The month of spent_usd, YYYY-MM.' }),
    rate_limits: Type.Object({
      requests_per_minute: Nullable(Type.Integer(), { description: 'The customer\'s request window, or null: none.' }),
      tokens_per_minute: Nullable(Type.Integer(), { description: 'The customer\'s token window, or null: none.' }),
    }),
    created_at: Unix('When an inference first named the customer, or its bounds were first set'),
    updated_at: UnixOrNull('When its budget or rate limits were last set'),
  },
  { description: 'An end customer of a project (CONTRACT §22).' },
);

export const customersRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.put(
    '/v1/projects/:project_id/customers/:customer/budget',
    { config: { action: 'customer.budget.update' }, schema: { params: CustomerParams, body: UpdateCustomerBudget, response: { 200: CustomerObject } } },
    async (req) => presentCustomer(await updateCustomerBudget(app.ports.customers, req.ctx, req.params.project_id, req.params.customer, req.body)),
  );

  app.put(
    '/v1/projects/:project_id/customers/:customer/rate-limits',
    { config: { action: 'customer.rate_limits.update' }, schema: { params: CustomerParams, body: UpdateCustomerRateLimits, response: { 200: CustomerObject } } },
    async (req) => presentCustomer(await updateCustomerRateLimits(app.ports.customers, req.ctx, req.params.project_id, req.params.customer, req.body)),
  );

  app.get(
    '/v1/projects/:project_id/customers/:customer',
    { config: { action: 'customer.read' }, schema: { params: CustomerParams, response: { 200: CustomerObject } } },
    async (req) => presentCustomer(await getCustomer(app.ports.customers, req.ctx, req.params.project_id, req.params.customer)),
  );

  app.get(
    '/v1/projects/:project_id/customers',
    { config: { action: 'customer.list' }, schema: { params: ProjectIdParams, querystring: CustomerListQuery, response: { 200: ListOf(CustomerObject) } } },
    async (req, reply) =>
      sendList(reply, await listCustomers(app.ports.customers, req.ctx, req.params.project_id, req.query), `/v1/projects/${req.params.project_id}/customers`, presentCustomer),
  );
};
