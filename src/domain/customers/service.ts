import type { Customer } from '../../generated/prisma/client.ts';
import type { Tx } from '../../db/client.ts';
import { invalid, SvcError } from '../../errors/svc-error.ts';
import { recordAudit } from '../audit/service.ts';
import { periodOf } from '../budgets/service.ts';
import { spentMany } from '../budgets/store.ts';
import { budgetMicros as toBudgetMicros } from '../keys/service.ts';
import { microsToUsd } from '../../kernel/money.ts';
import { ownTransaction, requireProjectId, type Ctx, type Checked } from '../context.ts';
import { enqueueEvent } from '../events/outbox.ts';
import { normalizePageQuery, type Page } from '../pagination.ts';
import { parseInput } from '../validation.ts';
import type { CustomerPorts } from './ports.ts';
import { CUSTOMER_ID_RE, CUSTOMER_ID_RULE, CustomerListQuery, UpdateCustomerBudget, UpdateCustomerRateLimits } from './schema.ts';
import { customerScope } from './scope.ts';
import { customerPage, findCustomer } from './store.ts';

/** An end customer of a project (CONTRACT §22) with its month's spend, as both surfaces present it. */
export interface CustomerView {
  projectId: string;
  customer: string;
  budgetMicros: bigint | null;
  hardStop: boolean;
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
  spentMicros: bigint;
  period: string;
  createdAt: Date;
  updatedAt: Date | null;
}

const customerNotFound = () => new SvcError('not_found', { param: 'customer', message: 'No such customer in this project.' });

/** The customer id of a path or an argument: the same rule as an inference's (400 param customer). */
export function checkCustomerId(customer: string): string {
  if (typeof customer !== 'string' || !CUSTOMER_ID_RE.test(customer)) throw invalid('customer', `customer ${CUSTOMER_ID_RULE}.`);
  return customer;
}

function viewOf(row: Customer, spentMicros: bigint, period: string): CustomerView {
  const times = [row.budgetUpdatedAt, row.rateLimitsUpdatedAt].filter((d): d is Date => d !== null);
  return {
    projectId: row.projectId,
    customer: row.customer,
    budgetMicros: row.budgetMicros,
    hardStop: row.hardStop,
    requestsPerMinute: row.requestsPerMinute,
    tokensPerMinute: row.tokensPerMinute,
    spentMicros,
    period,
    createdAt: row.createdAt,
    updatedAt: times.length > 0 ? new Date(Math.max(...times.map((d) => d.getTime()))) : null,
  };
}

async function withSpend(ctx: Ctx, rows: Customer[], db: Tx = ctx.db): Promise<CustomerView[]> {
  const period = periodOf(ctx.now());
  const spent = await spentMany(db, rows.map((r) => customerScope(r.projectId, r.customer)), period);
  return rows.map((r, i) => viewOf(r, spent[i]!, period));
}

/** GET /v1/projects/{id}/customers/{customer}: its bounds and its spend this month (read-your-writes). */
export async function getCustomer(ports: CustomerPorts, ctx: Ctx, projectId: string, customer: string): Promise<CustomerView> {
  const id = await requireProjectId(ctx, projectId);
  checkCustomerId(customer);
  await ports.outcomes.flush({ timeoutMs: 2_000 });
  const row = await findCustomer(ctx.db, id, customer);
  if (!row) throw customerNotFound();
  return (await withSpend(ctx, [row]))[0]!;
}

/**
 * GET /v1/projects/{id}/customers: the customers the project's inferences named or whose bounds were set, newest
 * (first seen) first; the cursors are customer ids of the list.
 */
export async function listCustomers(ports: CustomerPorts, ctx: Ctx, projectId: string, raw: unknown): Promise<Page<CustomerView>> {
  const query = parseInput(CustomerListQuery, raw);
  const id = await requireProjectId(ctx, projectId);
  const { limit } = normalizePageQuery({ limit: query.limit });
  if (query.starting_after !== undefined && query.ending_before !== undefined) {
    throw invalid('ending_before', 'Pass starting_after or ending_before, not both.');
  }
  await ports.outcomes.flush({ timeoutMs: 2_000 });
  const cursorId = query.starting_after ?? query.ending_before;
  let cursor: { createdAt: Date; customer: string; direction: 'older' | 'newer' } | undefined;
  if (cursorId !== undefined) {
    const param = query.starting_after !== undefined ? 'starting_after' : 'ending_before';
    const at = await findCustomer(ctx.db, id, cursorId);
    if (!at) throw invalid(param, `${param} does not name a customer of this list.`);
    cursor = { createdAt: at.createdAt, customer: at.customer, direction: param === 'starting_after' ? 'older' : 'newer' };
  }
  const rows = await customerPage(ctx.db, id, { cursor, take: limit + 1 });
  const hasMore = rows.length > limit;
  const page = rows.slice(0, limit);
  if (cursor?.direction === 'newer') page.reverse();
  return { data: await withSpend(ctx, page), hasMore, limit };
}

export interface CustomerBudgetChange extends Checked {
  customer: string;
  budgetMicros: bigint | null;
  hardStop: boolean;
}

/** updateCustomerBudget's validation, writing nothing (domain/governance: the project's `budget` dual control). */
export async function checkCustomerBudget(_ports: CustomerPorts, ctx: Ctx, projectId: string, customer: string, raw: unknown): Promise<CustomerBudgetChange> {
  const input = parseInput(UpdateCustomerBudget, raw);
  const budgetMicros = input.budget_usd === null ? null : toBudgetMicros(input.budget_usd);
  const id = await requireProjectId(ctx, projectId);
  checkCustomerId(customer);
  if (!(await ctx.db.project.findUnique({ where: { id }, select: { id: true } }))) throw new SvcError('not_found', { param: 'project_id', message: 'No such project.' });
  return { projectId: id, customer, budgetMicros, hardStop: input.hard_stop ?? true };
}

/** updateCustomerBudget's change, as checkCustomerBudget validated it. */
export async function applyCustomerBudget(ports: CustomerPorts, ctx: Ctx, change: CustomerBudgetChange, transact = ownTransaction(ctx)): Promise<CustomerView> {
  const { projectId, customer, budgetMicros, hardStop } = change;
  const now = ctx.now();
  await ports.outcomes.flush({ timeoutMs: 2_000 });
  const row = await transact(async (tx) => {
    const saved = await tx.customer.upsert({
      where: { projectId_customer: { projectId, customer } },
      create: { projectId, customer, budgetMicros, hardStop, budgetUpdatedAt: now, createdAt: now },
      update: { budgetMicros, hardStop, budgetUpdatedAt: now },
    });
    const data = { policy: 'budget', customer, budget_usd: budgetMicros === null ? null : microsToUsd(budgetMicros), hard_stop: hardStop };
    await recordAudit(tx, ctx, 'policy.updated', { projectId, targetId: projectId, data });
    await enqueueEvent(tx, now, projectId, 'policy.updated', data);
    return (await withSpend(ctx, [saved], tx))[0]!;
  });
  // After commit. The counter is kept only while a hard-stop budget exists (and added to only then), so it may be
  // behind: it is seeded again from budget_spend at the next check. Then every replica reads the new bounds.
  await ports.counters.forget(projectId, [customerScope(projectId, customer)], periodOf(now));
  await ports.policies.invalidate(projectId, customer);
  return row;
}

export interface CustomerRateLimitsChange extends Checked {
  customer: string;
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
}

/** updateCustomerRateLimits' validation, writing nothing (domain/governance: the project's `rate_limits` dual control). */
export async function checkCustomerRateLimits(
  _ports: CustomerPorts,
  ctx: Ctx,
  projectId: string,
  customer: string,
  raw: unknown,
): Promise<CustomerRateLimitsChange> {
  const input = parseInput(UpdateCustomerRateLimits, raw);
  const id = await requireProjectId(ctx, projectId);
  checkCustomerId(customer);
  if (!(await ctx.db.project.findUnique({ where: { id }, select: { id: true } }))) throw new SvcError('not_found', { param: 'project_id', message: 'No such project.' });
  return { projectId: id, customer, requestsPerMinute: input.requests_per_minute, tokensPerMinute: input.tokens_per_minute };
}

/** updateCustomerRateLimits' change, as checkCustomerRateLimits validated it. */
export async function applyCustomerRateLimits(
  ports: CustomerPorts,
  ctx: Ctx,
  change: CustomerRateLimitsChange,
  transact = ownTransaction(ctx),
): Promise<CustomerView> {
  const { projectId, customer, requestsPerMinute, tokensPerMinute } = change;
  const now = ctx.now();
  const row = await transact(async (tx) => {
    const before = await tx.customer.findUnique({ where: { projectId_customer: { projectId, customer } }, select: { rateLimitsUpdatedAt: true } });
    // The update time is the windows' version: strictly increasing, so new limits start with fresh windows.
    const updatedAt = new Date(Math.max(now.getTime(), (before?.rateLimitsUpdatedAt?.getTime() ?? 0) + 1));
    const saved = await tx.customer.upsert({
      where: { projectId_customer: { projectId, customer } },
      create: { projectId, customer, requestsPerMinute, tokensPerMinute, rateLimitsUpdatedAt: updatedAt, createdAt: now },
      update: { requestsPerMinute, tokensPerMinute, rateLimitsUpdatedAt: updatedAt },
    });
    const data = { policy: 'rate_limits', customer, requests_per_minute: requestsPerMinute, tokens_per_minute: tokensPerMinute };
    await recordAudit(tx, ctx, 'policy.updated', { projectId, targetId: projectId, data });
    await enqueueEvent(tx, now, projectId, 'policy.updated', data);
    return (await withSpend(ctx, [saved], tx))[0]!;
  });
  await ports.policies.invalidate(projectId, customer);
  return row;
}
