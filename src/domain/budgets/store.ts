import type { Tx } from '../../db/client.ts';
import type { RawSql } from '../../db/sql.ts';

export async function markThresholds(tx: RawSql, scope: string, period: string, thresholds: string[]): Promise<void> {
  await tx.$executeRaw`UPDATE budget_spend SET thresholds_sent = ${thresholds}::text[] WHERE scope = ${scope} AND period = ${period}`;
}

export async function spentIn(db: Tx, scope: string, period: string): Promise<bigint> {
  const row = await db.budgetSpend.findUnique({ where: { scope_period: { scope, period } }, select: { spentMicros: true } });
  return row?.spentMicros ?? 0n;
}

/** Month spend of several scopes in one statement, in the order asked (0 for a scope with no row). */
export async function spentMany(db: Tx, scopes: readonly string[], period: string): Promise<bigint[]> {
  if (scopes.length === 0) return [];
  const rows = await db.budgetSpend.findMany({
    where: { scope: { in: [...scopes] }, period },
    select: { scope: true, spentMicros: true },
  });
  const by = new Map(rows.map((r) => [r.scope, r.spentMicros]));
  return scopes.map((s) => by.get(s) ?? 0n);
}

export interface SpendRow {
  scope: string;
  period: string;
  projectId: string;
  micros: bigint;
}

/**
 * Adds to the month spend of many scopes in one statement (INSERT … ON CONFLICT DO UPDATE holds each row lock until
 * the transaction ends). Rows are locked in (scope, period) order, so two batches touching the
 * same scopes queue instead of deadlocking; each sees the thresholds the previous one marked.
 */
export async function addSpendBatch(
  tx: RawSql,
  rows: readonly SpendRow[],
  now: Date,
): Promise<{ scope: string; period: string; spent: bigint; thresholdsSent: string[] }[]> {
  if (rows.length === 0) return [];
  const sorted = [...rows].sort((a, b) => (a.scope === b.scope ? (a.period < b.period ? -1 : 1) : a.scope < b.scope ? -1 : 1));
  const out = await tx.$queryRaw<{ scope: string; period: string; spent_micros: unknown; thresholds_sent: string[] | null }[]>`
    INSERT INTO budget_spend (scope, period, project_id, spent_micros, thresholds_sent, updated_at)
    SELECT s.scope, s.period, s.project_id, s.micros::bigint, ARRAY[]::text[], ${now}
      FROM unnest(${sorted.map((r) => r.scope)}::text[], ${sorted.map((r) => r.period)}::text[],
                  ${sorted.map((r) => r.projectId)}::text[], ${sorted.map((r) => r.micros.toString())}::text[])
           WITH ORDINALITY AS s(scope, period, project_id, micros, n)
     ORDER BY s.n
    ON CONFLICT (scope, period)
    DO UPDATE SET spent_micros = budget_spend.spent_micros + EXCLUDED.spent_micros, updated_at = EXCLUDED.updated_at
    RETURNING scope, period, spent_micros, thresholds_sent`;
  return out.map((r) => ({ scope: r.scope, period: r.period, spent: BigInt(String(r.spent_micros)), thresholdsSent: r.thresholds_sent ?? [] }));
}

/**
 * Current budgets of keys, projects and end customers (only those that have one), by scope `key:<id>` /
 * `project:<id>` / `customer:<project>:<customer>` (customers/scope.ts): one statement.
 */
export async function budgetsOf(
  tx: RawSql,
  keyIds: readonly string[],
  projectIds: readonly string[],
  customers: readonly { projectId: string; customer: string }[] = [],
): Promise<Map<string, bigint>> {
  const rows = await tx.$queryRaw<{ scope: string; budget_micros: unknown }[]>`
    SELECT 'key:' || id AS scope, budget_micros FROM api_keys WHERE id = ANY(${[...keyIds]}::text[]) AND budget_micros IS NOT NULL
    UNION ALL
    SELECT 'project:' || id AS scope, budget_micros FROM projects WHERE id = ANY(${[...projectIds]}::text[]) AND budget_micros IS NOT NULL
    UNION ALL
    SELECT 'customer:' || c.project_id || ':' || c.customer AS scope, c.budget_micros
      FROM customers c
      JOIN unnest(${customers.map((c) => c.projectId)}::text[], ${customers.map((c) => c.customer)}::text[]) AS w(project_id, customer)
        ON c.project_id = w.project_id AND c.customer = w.customer
     WHERE c.budget_micros IS NOT NULL`;
  return new Map(rows.map((r) => [r.scope, BigInt(String(r.budget_micros))]));
}
