import { SvcError, invalid } from '../../errors/svc-error.ts';
import { recordAudit } from '../audit/service.ts';
import type { Ctx, Deps } from '../context.ts';
import { enqueueEvent } from '../events/outbox.ts';
import { MICROS_PER_USD, usdToMicros } from '../keys/service.ts';
import { requireProjectId } from '../projects/service.ts';
import { sendBudgetAlertEmail, type BudgetAlert } from './alert-mail.ts';
import { addSpend, markThresholds, readBudgets, spentIn } from './store.ts';

/** Budgets run per calendar month in UTC (CONTRACT §7). */
export function periodOf(d: Date): string {
  return `${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, '0')}`;
}

export const microsToUsd = (m: bigint): number => Number(m) / MICROS_PER_USD;

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

export interface UpdateBudgetInput {
  budget_usd?: unknown;
}

export async function getBudget(ctx: Ctx, projectId: string): Promise<ProjectBudget> {
  const id = await requireProjectId(ctx, projectId);
  const period = periodOf(ctx.now());
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

function validBudget(input: UpdateBudgetInput): bigint | null {
  if (!('budget_usd' in input) || input.budget_usd === undefined) throw invalid('budget_usd', 'Missing required parameter: budget_usd.');
  const value = input.budget_usd;
  if (value === null) return null;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw invalid('budget_usd', 'budget_usd must be a number of at least 0, or null to remove the budget.');
  }
  if (value > 1e12) throw invalid('budget_usd', 'budget_usd is too large.');
  return usdToMicros(value);
}

/**
 * Sets (or, with null, removes) the project's monthly budget. Audits policy.updated and emits policy.updated
 * `{policy: "budget", budget_usd}` in the same transaction. Alerts already sent this month are not sent again.
 */
export async function updateBudget(ctx: Ctx, projectId: string, input: UpdateBudgetInput): Promise<ProjectBudget> {
  const budgetMicros = validBudget(input);
  const id = await requireProjectId(ctx, projectId);
  const now = ctx.now();
  const period = periodOf(now);
  return ctx.db.$transaction(async (tx) => {
    const found = await tx.project.findUnique({ where: { id }, select: { id: true } });
    if (!found) throw new SvcError('not_found', { param: 'project_id', message: 'No such project.' });
    await tx.project.update({ where: { id }, data: { budgetMicros, budgetUpdatedAt: now } });
    const data = { policy: 'budget', budget_usd: budgetMicros === null ? null : microsToUsd(budgetMicros) };
    await recordAudit(tx, ctx, 'policy.updated', { projectId: id, targetId: id, data });
    await enqueueEvent(tx, now, id, 'policy.updated', data);
    return { projectId: id, budgetMicros, spentMicros: await spentIn(tx, `project:${id}`, period), period, updatedAt: now };
  });
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
 */
export async function assertWithinBudget(ctx: Ctx): Promise<void> {
  const { keyId, projectId } = spendOwner(ctx);
  if (!projectId) return;
  const period = periodOf(ctx.now());
  const b = await readBudgets(ctx.db, keyId, projectId, period);
  if (b.keyBudget !== null && b.keySpent >= b.keyBudget) {
    throw new SvcError('budget_exceeded', {
      message: `The key's monthly budget of ${usdText(b.keyBudget)} is exhausted for ${period} (spent ${usdText(b.keySpent)}).`,
    });
  }
  if (b.projectBudget !== null && b.projectSpent >= b.projectBudget) {
    throw new SvcError('budget_exceeded', {
      message: `The project's monthly budget of ${usdText(b.projectBudget)} is exhausted for ${period} (spent ${usdText(b.projectSpent)}).`,
    });
  }
}

const pending = new WeakMap<Deps, Set<Promise<void>>>();

/**
 * Adds a finished request's cost to the month spend of the key and of the project (one transaction). Crossing 80% and
 * 95% of a budget emits budget.threshold, reaching 100% budget.exceeded: each once per scope and month, all that a
 * single spend crosses, in that order. E-mails follow after commit (see alert-mail.ts).
 */
export async function recordSpend(ctx: Ctx, costMicros: bigint): Promise<void> {
  const { keyId, projectId } = spendOwner(ctx);
  if (!projectId || costMicros <= 0n) return;
  const now = ctx.now();
  const period = periodOf(now);
  const alerts = await ctx.db.$transaction(async (tx) => {
    const fired: BudgetAlert[] = [];
    const scopes = [...(keyId ? [{ scope: `key:${keyId}`, keyId }] : []), { scope: `project:${projectId}`, keyId: null }];
    for (const s of scopes) {
      const { spent, thresholdsSent } = await addSpend(tx, s.scope, period, projectId, costMicros, now);
      const budget = s.keyId
        ? (await tx.apiKey.findUnique({ where: { id: s.keyId }, select: { budgetMicros: true } }))?.budgetMicros
        : (await tx.project.findUnique({ where: { id: projectId }, select: { budgetMicros: true } }))?.budgetMicros;
      if (budget === null || budget === undefined) continue;
      const crossed = LEVELS.filter((l) => spent * 100n >= budget * l.percent && !thresholdsSent.includes(l.mark));
      if (crossed.length === 0) continue;
      await markThresholds(tx, s.scope, period, [...thresholdsSent, ...crossed.map((l) => l.mark)]);
      for (const level of crossed) {
        const alert: BudgetAlert = {
          type: level.type,
          keyId: s.keyId,
          projectId,
          budgetUsd: microsToUsd(budget),
          spentUsd: microsToUsd(spent),
          threshold: level.threshold,
          period,
        };
        await enqueueEvent(tx, now, projectId, level.type, {
          key_id: alert.keyId,
          project_id: projectId,
          budget_usd: alert.budgetUsd,
          spent_usd: alert.spentUsd,
          threshold: alert.threshold,
          period,
        });
        fired.push(alert);
      }
    }
    return fired;
  });
  const deps = ctx.deps;
  for (const alert of alerts) {
    let set = pending.get(deps);
    if (!set) pending.set(deps, (set = new Set()));
    const p = sendBudgetAlertEmail(deps.config, deps.log, alert).finally(() => set.delete(p));
    set.add(p);
  }
}

/** Waits for the alert e-mails still being sent (shutdown, tests). */
export async function flushBudgetAlerts(deps: Deps): Promise<void> {
  await Promise.all([...(pending.get(deps) ?? [])]);
}
