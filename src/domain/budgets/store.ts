import type { Tx } from '../../db/client.ts';

export interface BudgetRow {
  keyBudget: bigint | null;
  projectBudget: bigint | null;
  keySpent: bigint;
  projectSpent: bigint;
}

const big = (v: unknown): bigint | null => (v === null || v === undefined ? null : BigInt(String(v)));

/** The key's and the project's budgets and month-to-date spend, in one round trip. */
export async function readBudgets(db: Tx, keyId: string | null, projectId: string, period: string): Promise<BudgetRow> {
  const rows = await db.$queryRaw<Record<string, unknown>[]>`
    SELECT
      (SELECT budget_micros FROM api_keys WHERE id = ${keyId ?? ''}) AS key_budget,
      (SELECT budget_micros FROM projects WHERE id = ${projectId}) AS project_budget,
      (SELECT spent_micros FROM budget_spend WHERE scope = ${`key:${keyId ?? ''}`} AND period = ${period}) AS key_spent,
      (SELECT spent_micros FROM budget_spend WHERE scope = ${`project:${projectId}`} AND period = ${period}) AS project_spent`;
  const row = rows[0] ?? {};
  return {
    keyBudget: keyId ? big(row.key_budget) : null,
    projectBudget: big(row.project_budget),
    keySpent: big(row.key_spent) ?? 0n,
    projectSpent: big(row.project_spent) ?? 0n,
  };
}

/**
 * Adds to a scope's month spend atomically (INSERT … ON CONFLICT DO UPDATE holds the row lock until the transaction
 * ends, so concurrent spenders of one scope queue here and each sees the thresholds the previous one marked).
 */
export async function addSpend(
  tx: Tx,
  scope: string,
  period: string,
  projectId: string,
  micros: bigint,
  now: Date,
): Promise<{ spent: bigint; thresholdsSent: string[] }> {
  const rows = await tx.$queryRaw<{ spent_micros: unknown; thresholds_sent: string[] }[]>`
    INSERT INTO budget_spend (scope, period, project_id, spent_micros, thresholds_sent, updated_at)
    VALUES (${scope}, ${period}, ${projectId}, ${micros}, ARRAY[]::text[], ${now})
    ON CONFLICT (scope, period)
    DO UPDATE SET spent_micros = budget_spend.spent_micros + EXCLUDED.spent_micros, updated_at = EXCLUDED.updated_at
    RETURNING spent_micros, thresholds_sent`;
  const row = rows[0]!;
  return { spent: BigInt(String(row.spent_micros)), thresholdsSent: row.thresholds_sent ?? [] };
}

export async function markThresholds(tx: Tx, scope: string, period: string, thresholds: string[]): Promise<void> {
  await tx.budgetSpend.update({ where: { scope_period: { scope, period } }, data: { thresholdsSent: thresholds } });
}

export async function spentIn(db: Tx, scope: string, period: string): Promise<bigint> {
  const row = await db.budgetSpend.findUnique({ where: { scope_period: { scope, period } }, select: { spentMicros: true } });
  return row?.spentMicros ?? 0n;
}
