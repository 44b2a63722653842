import type { Tx } from '../../db/client.ts';
import type { RawSql } from '../../db/sql.ts';
import type { Customer } from '../../generated/prisma/client.ts';

/**
 * In the outcome writer's transaction: the end customers a batch of outcomes names, each inserted once with the time
 * it was first seen (ON CONFLICT DO NOTHING). No statement when no outcome names a customer.
 */
export async function registerCustomers(
  tx: RawSql,
  outcomes: readonly { projectId: string; customer?: string | null; createdAt: Date }[],
): Promise<void> {
  const first = new Map<string, { projectId: string; customer: string; createdAt: Date }>();
  for (const o of outcomes) {
    if (!o.customer) continue;
    const k = `${o.projectId}\n${o.customer}`;
    const seen = first.get(k);
    if (!seen || o.createdAt < seen.createdAt) first.set(k, { projectId: o.projectId, customer: o.customer, createdAt: o.createdAt });
  }
  if (first.size === 0) return;
  // A fixed order: two batches inserting the same customers wait for each other instead of deadlocking.
  const rows = [...first.values()].sort((a, b) => (a.projectId === b.projectId ? (a.customer < b.customer ? -1 : 1) : a.projectId < b.projectId ? -1 : 1));
  await tx.$executeRaw`
    INSERT INTO customers (project_id, customer, created_at)
    SELECT * FROM unnest(${rows.map((r) => r.projectId)}::text[], ${rows.map((r) => r.customer)}::text[], ${rows.map((r) => r.createdAt.toISOString())}::timestamptz[])
    ON CONFLICT DO NOTHING`;
}

export const findCustomer = (db: Tx, projectId: string, customer: string): Promise<Customer | null> =>
  db.customer.findUnique({ where: { projectId_customer: { projectId, customer } } });

/** A page of the project's customers, newest first (first seen), after or before a cursor customer. */
export async function customerPage(
  db: Tx,
  projectId: string,
  args: { cursor?: { createdAt: Date; customer: string; direction: 'older' | 'newer' }; take: number },
): Promise<Customer[]> {
  const c = args.cursor;
  const where = c
    ? c.direction === 'older'
      ? { OR: [{ createdAt: { lt: c.createdAt } }, { createdAt: c.createdAt, customer: { lt: c.customer } }] }
      : { OR: [{ createdAt: { gt: c.createdAt } }, { createdAt: c.createdAt, customer: { gt: c.customer } }] }
    : {};
  const order = c?.direction === 'newer' ? 'asc' : 'desc';
  return db.customer.findMany({ where: { projectId, ...where }, orderBy: [{ createdAt: order }, { customer: order }], take: args.take });
}
