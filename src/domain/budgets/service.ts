import type { Tx } from '../../db/client.ts';
import type { RawSql } from '../../db/sql.ts';
import { SvcError } from '../../errors/svc-error.ts';
import { recordAudit } from '../audit/service.ts';
import { ownTransaction, requireProjectId, type Ctx, type Checked } from '../context.ts';
import type { BudgetPorts } from './ports.ts';
import { enqueueEvent, enqueueEvents, type NewEvent } from '../events/outbox.ts';
import { budgetMicros as toBudgetMicros } from '../keys/service.ts';
import { parseInput } from '../validation.ts';
import { UpdateBudget } from './schema.ts';
import { microsToUsd } from '../../kernel/money.ts';
import type { BudgetAlert } from './types.ts';
import { addSpendBatch, budgetsOf, markThresholds, spentIn, type SpendRow } from './store.ts';
import { customerScope, type BudgetedCustomer } from '../customers/scope.ts';

export type { BudgetAlert };

/** Budgets run per calendar month in UTC (CONTRACT §7). */
export function periodOf(d: Date): string {
  return `${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, '0')}`;
}

/** Alerts in the order they fire; `mark` is what budget_spend.thresholds_sent remembers for the month. */
const LEVELS = [
  { mark: '0.8', percent: 80n, threshold: 0.8, type: 'budget.threshold' },
  { mark: '0.95', percent: 95n, threshold: 0.95, type: 'budget.threshold' },
  { mark: '1', percent: 100n, threshold: 1, type: 'budget.exceeded' },
] as const;

export interface ProjectBudget {
  projectId: string;
  budgetMicros: bigint | null;
  spentMicros: bigint;
  period: string;
  updatedAt: Date | null;
}

export async function getBudget(ports: BudgetPorts, ctx: Ctx, projectId: string): Promise<ProjectBudget> {
  const id = await requireProjectId(ctx, projectId);
  const period = periodOf(ctx.now());
  // Read-your-writes: the spend of the inferences this replica answered is in budget_spend before it is read.
  await ports.outcomes.flush({ timeoutMs: 2_000 });
  const project = await ctx.db.project.findUnique({ where: { id }, select: { budgetMicros: true, budgetUpdatedAt: true } });
  if (!project) throw new SvcError('not_found', { param: 'project_id', message: 'No such project.' });
  return {
    projectId: id,
    budgetMicros: project.budgetMicros,
    spentMicros: await spentIn(ctx.db, `project:${id}`, period),
    period,
    updatedAt: project.budgetUpdatedAt,
  };
}

export interface BudgetChange extends Checked {
  budgetMicros: bigint | null;
}

const projectNotFound = () => new SvcError('not_found', { param: 'project_id', message: 'No such project.' });

/** updateBudget's validation (the amount, the project, that it exists), writing nothing (domain/governance). */
export async function checkBudget(_ports: BudgetPorts, ctx: Ctx, projectId: string, raw: unknown): Promise<BudgetChange> {
  const input = parseInput(UpdateBudget, raw);
  const budgetMicros = input.budget_usd === null ? null : toBudgetMicros(input.budget_usd);
  const id = await requireProjectId(ctx, projectId);
  if (!(await ctx.db.project.findUnique({ where: { id }, select: { id: true } }))) throw projectNotFound();
  return { projectId: id, budgetMicros };
}

/** updateBudget's change, as checkBudget validated it. */
export async function applyBudget(ports: BudgetPorts, ctx: Ctx, change: BudgetChange, transact = ownTransaction(ctx)): Promise<ProjectBudget> {
  const { projectId: id, budgetMicros } = change;
  const now = ctx.now();
  const period = periodOf(now);
  await ports.outcomes.flush({ timeoutMs: 2_000 });
  let hadBudget = false;
  const updated = await transact(async (tx) => {
    const found = await tx.project.findUnique({ where: { id }, select: { budgetMicros: true } });
    if (!found) throw projectNotFound();
    hadBudget = found.budgetMicros !== null;
    await tx.project.update({ where: { id }, data: { budgetMicros, budgetUpdatedAt: now } });
    const data = { policy: 'budget', budget_usd: budgetMicros === null ? null : microsToUsd(budgetMicros) };
    await recordAudit(tx, ctx, 'policy.updated', { projectId: id, targetId: id, data });
    await enqueueEvent(tx, now, id, 'policy.updated', data);
    return { projectId: id, budgetMicros, spentMicros: await spentIn(tx, `project:${id}`, period), period, updatedAt: now };
  });
  // After commit: the next inference on any replica checks the new budget. The project's counter is not kept while it
  // has no budget, so a first budget drops it: it is seeded again from budget_spend at the next check.
  if (!hadBudget && budgetMicros !== null) await ports.counters.forget(id, [`project:${id}`], period);
  await ports.projects.invalidate(id);
  return updated;
}

/**
 * Sets (or, with null, removes) the project's monthly budget. Audits policy.updated and emits policy.updated
 * `{policy: "budget", budget_usd}` in the same transaction. Alerts already sent this month are not sent again.
 */
export async function updateBudget(ports: BudgetPorts, ctx: Ctx, projectId: string, raw: unknown): Promise<ProjectBudget> {
  return applyBudget(ports, ctx, await checkBudget(ports, ctx, projectId, raw));
}

function spendOwner(ctx: Ctx): { keyId: string | null; projectId: string | null } {
  return {
    keyId: ctx.caller.kind === 'key' ? ctx.caller.keyId : null,
    projectId: ctx.caller.projectId ?? ctx.projectId,
  };
}

const usdText = (m: bigint) => `$${microsToUsd(m).toFixed(2)}`;

/**
 * Before a request that spends: 429 budget_exceeded when the month's spend of the key or of its project is already at
 * or over its budget (a monthly hard stop; no Retry-After, unlike rate_limit_exceeded). A request that starts under
 * budget runs to completion even if it ends over it. The operator has no key budget; the project's still applies.
 * No SQL in the steady state: the budgets come from the key cache and the project cache, the spend from the month
 * counters (one MGET, none at all when neither has a budget). Exact for a sequential client: a request's spend is
 * added to the counters before its response is sent.
 */
export async function assertWithinBudget(
  ports: BudgetPorts,
  ctx: Ctx,
  projectBudgetMicros?: bigint | null,
  /** CONTRACT §22: the end customer the inference names; its hard-stop budget is read in the same MGET. */
  customer?: BudgetedCustomer | null,
): Promise<void> {
  const { keyId, projectId } = spendOwner(ctx);
  if (!projectId) return;
  const keyBudget = keyId ? (ctx.caller.budgetMicros ?? null) : null;
  const projectBudget =
    projectBudgetMicros !== undefined ? projectBudgetMicros : ((await ports.projects.get(projectId))?.budgetMicros ?? null);
  const customerBudget = customer?.hardStop ? customer.budgetMicros : null;
  if (keyBudget === null && projectBudget === null && customerBudget === null) return;
  const period = periodOf(ctx.now());
  const scopes = [
    ...(keyBudget !== null ? [`key:${keyId}`] : []),
    ...(projectBudget !== null ? [`project:${projectId}`] : []),
    ...(customerBudget !== null ? [customerScope(projectId, customer!.id)] : []),
  ];
  const spent = await ports.counters.read(projectId, scopes, period);
  let i = 0;
  if (keyBudget !== null) {
    const keySpent = spent[i++]!;
    if (keySpent >= keyBudget) {
      throw new SvcError('budget_exceeded', {
        message: `The key's monthly budget of ${usdText(keyBudget)} is exhausted for ${period} (spent ${usdText(keySpent)}).`,
      });
    }
  }
  if (projectBudget !== null) {
    const projectSpent = spent[i++]!;
    if (projectSpent >= projectBudget) {
      throw new SvcError('budget_exceeded', {
        message: `The project's monthly budget of ${usdText(projectBudget)} is exhausted for ${period} (spent ${usdText(projectSpent)}).`,
      });
    }
  }
  if (customerBudget !== null) {
    const customerSpent = spent[i]!;
    if (customerSpent >= customerBudget) {
      throw new SvcError('budget_exceeded', {
        param: 'customer',
        message: `The customer's monthly budget of ${usdText(customerBudget)} is exhausted for ${period} (spent ${usdText(customerSpent)}).`,
      });
    }
  }
}

/** What a finished request charged, carried on its outcome to budget_spend (InferenceOutcome.spend). */
export interface SpendCharge {
  keyId: string | null;
  period: string;
}

/** One hard-stop customer budget's counter is kept (and added to) on the request path; alert-only ones are not. */
const countedCustomer = (customer: BudgetedCustomer | null | undefined): customer is BudgetedCustomer =>
  !!customer && customer.hardStop && customer.budgetMicros !== null;

/**
 * After a request: adds its cost to the month counters of the key and of the project when they have a budget (request
 * path, no SQL; the command leaves with the others of the same step; no command at all without budgets). The durable
 * record (budget_spend, kept for every scope) and the alerts follow with the outcome's batch (applySpend). The charge
 * is null when there is nothing to charge.
 */
export function chargeSpend(
  ports: BudgetPorts,
  ctx: Ctx,
  projectId: string,
  costMicros: bigint,
  projectBudgetMicros: bigint | null,
  customer?: BudgetedCustomer | null,
): { charge: SpendCharge | null; added: Promise<void> } {
  if (costMicros <= 0n) return { charge: null, added: Promise.resolve() };
  const keyId = ctx.caller.kind === 'key' ? ctx.caller.keyId : null;
  const period = periodOf(ctx.now());
  const scopes = [
    ...(keyId && (ctx.caller.budgetMicros ?? null) !== null ? [`key:${keyId}`] : []),
    ...(projectBudgetMicros !== null ? [`project:${projectId}`] : []),
    ...(countedCustomer(customer) ? [customerScope(projectId, customer.id)] : []),
  ];
  const added = scopes.length > 0 ? ports.counters.add(projectId, scopes, period, costMicros) : Promise.resolve();
  return { charge: { keyId, period }, added };
}

/** One outcome's spend, as applySpend takes it. */
export interface SpendEntry {
  projectId: string;
  keyId: string | null;
  /** CONTRACT §22: the end customer the inference named, whose scope is charged too. */
  customer?: string | null;
  period: string;
  micros: bigint;
}

/**
 * In the outcome writer's transaction: adds a batch's spend to budget_spend (aggregated per scope and month, one
 * statement) and fires what it crosses. Crossing 80% and 95% of a budget emits budget.threshold, reaching 100%
 * budget.exceeded: each once per scope and month (thresholds_sent, updated under the row lock that the add holds until
 * commit), all that the batch crosses, in that order. Returns the alerts to e-mail after commit (BudgetAlertSender).
 */
export async function applySpend(tx: RawSql, entries: readonly SpendEntry[], now: Date): Promise<BudgetAlert[]> {
  const rows = new Map<string, SpendRow & { keyId: string | null; customer: string | null }>();
  for (const e of entries) {
    if (e.micros <= 0n) continue;
    const scopes = [
      ...(e.keyId ? [{ scope: `key:${e.keyId}`, keyId: e.keyId, customer: null }] : []),
      { scope: `project:${e.projectId}`, keyId: null, customer: null },
      ...(e.customer ? [{ scope: customerScope(e.projectId, e.customer), keyId: null, customer: e.customer }] : []),
    ];
    for (const s of scopes) {
      const id = `${s.scope}|${e.period}`;
      const row = rows.get(id);
      if (row) row.micros += e.micros;
      else rows.set(id, { scope: s.scope, period: e.period, projectId: e.projectId, micros: e.micros, keyId: s.keyId, customer: s.customer });
    }
  }
  if (rows.size === 0) return [];
  const totals = await addSpendBatch(tx, [...rows.values()], now);
  const all = [...rows.values()];
  const budgets = await budgetsOf(
    tx,
    [...new Set(all.flatMap((r) => (r.keyId ? [r.keyId] : [])))],
    [...new Set(all.filter((r) => !r.keyId && !r.customer).map((r) => r.projectId))],
    all.flatMap((r) => (r.customer ? [{ projectId: r.projectId, customer: r.customer }] : [])),
  );
  const fired: BudgetAlert[] = [];
  const events: NewEvent[] = [];
  for (const t of totals) {
    const budget = budgets.get(t.scope);
    if (budget === undefined) continue;
    const crossed = LEVELS.filter((l) => t.spent * 100n >= budget * l.percent && !t.thresholdsSent.includes(l.mark));
    if (crossed.length === 0) continue;
    const row = rows.get(`${t.scope}|${t.period}`)!;
    await markThresholds(tx, t.scope, t.period, [...t.thresholdsSent, ...crossed.map((l) => l.mark)]);
    for (const level of crossed) {
      const alert: BudgetAlert = {
        type: level.type,
        keyId: row.keyId,
        ...(row.customer ? { customer: row.customer } : {}),
        projectId: row.projectId,
        budgetUsd: microsToUsd(budget),
        spentUsd: microsToUsd(t.spent),
        threshold: level.threshold,
        period: t.period,
      };
      events.push({
        projectId: row.projectId,
        type: level.type,
        createdAt: now,
        data: {
          key_id: alert.keyId,
          // CONTRACT §22: a customer's budget names the customer.
          ...(row.customer ? { customer: row.customer } : {}),
          project_id: alert.projectId,
          budget_usd: alert.budgetUsd,
          spent_usd: alert.spentUsd,
          threshold: alert.threshold,
          period: t.period,
        },
      });
      fired.push(alert);
    }
  }
  await enqueueEvents(tx, events);
  return fired;
}
