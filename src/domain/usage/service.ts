import { Prisma, type UsageRecord } from '../../generated/prisma/client.ts';
import { invalid } from '../../errors/svc-error.ts';
import type { Tx } from '../../db/client.ts';
import { visibleProjectId, type Ctx } from '../context.ts';
import type { UsagePorts } from './ports.ts';
import { paginate, type Page } from '../pagination.ts';
import { parseInput } from '../validation.ts';
import { UsageQuery } from './schema.ts';

export interface UsageDay {
  date: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  costMicros: bigint;
}

export type UsageList = { granularity: 'request'; page: Page<UsageRecord> } | { granularity: 'day'; days: UsageDay[] };

const DAY_MS = 86_400_000;
/** Default window of granularity=day, and the longest one may ask for. */
export const DEFAULT_DAYS = 30;
export const MAX_DAYS = 366;

export const utcDate = (d: Date): string => d.toISOString().slice(0, 10);

/** A YYYY-MM-DD (the schema's pattern) that is a day of the calendar. */
function parseDate(value: string, param: string): number {
  const ms = Date.parse(`${value}T00:00:00Z`);
  if (Number.isNaN(ms) || utcDate(new Date(ms)) !== value) throw invalid(param, `${param} must be a date as YYYY-MM-DD.`);
  // No usage is older than the Unix epoch; PostgreSQL has no year 0 to compare with.
  if (ms < 0) throw invalid(param, `${param} must be 1970-01-01 or later.`);
  return ms;
}

/** [from, to) in ms for the query's dates; either may be open. */
function dateRange(q: UsageQuery): { from?: number; to?: number } {
  const from = q.start_date !== undefined ? parseDate(q.start_date, 'start_date') : undefined;
  const to = q.end_date !== undefined ? parseDate(q.end_date, 'end_date') + DAY_MS : undefined;
  if (from !== undefined && to !== undefined && from >= to) throw invalid('end_date', 'end_date must not be before start_date.');
  return { from, to };
}

/**
 * GET /v1/usage. `granularity=request` (default): usage records newest first, cursor request_id. `granularity=day`:
 * one row per UTC day with usage, newest first, over start_date..end_date (default the last 30 days, at most 366);
 * the pagination parameters do not apply to it (spec 4.5).
 */
export async function listUsage(ports: UsagePorts, ctx: Ctx, raw: unknown): Promise<UsageList> {
  const query = parseInput(UsageQuery, raw);
  const granularity = query.granularity ?? 'request';
  const projectId = await visibleProjectId(ctx, query.project_id);
  const { from, to } = dateRange(query);
  // Read-your-writes: the usage records of inferences this replica answered are written before they are listed.
  await ports.outcomes.flush({ timeoutMs: 2_000 });
  // The read replica once it has replayed everything committed before this point (those records included).
  const db = await ports.reads.client();

  if (granularity === 'request') {
    const where: Prisma.UsageRecordWhereInput = {
      ...(projectId !== undefined ? { projectId } : {}),
      ...(query.customer !== undefined ? { customer: query.customer } : {}),
      ...(from !== undefined || to !== undefined
        ? { createdAt: { ...(from !== undefined ? { gte: new Date(from) } : {}), ...(to !== undefined ? { lt: new Date(to) } : {}) } }
        : {}),
    };
    const page = await paginate(query, {
      cursorField: 'request_id',
      fetch: ({ cursor, order, take }) =>
        db.usageRecord.findMany({
          where: { ...where, ...(cursor ? { requestId: cursor } : {}) },
          orderBy: { requestId: order },
          take,
        }),
      exists: async (requestId) => (await db.usageRecord.count({ where: { ...where, requestId } })) > 0,
    });
    return { granularity, page };
  }

  for (const p of ['limit', 'starting_after', 'ending_before'] as const) {
    if (query[p] !== undefined) throw invalid(p, `${p} applies only to granularity=request; use start_date and end_date.`);
  }
  const todayStart = Date.parse(`${utcDate(ctx.now())}T00:00:00Z`);
  const end = to ?? todayStart + DAY_MS;
  const start = from ?? end - DEFAULT_DAYS * DAY_MS;
  if (end - start > MAX_DAYS * DAY_MS) throw invalid('start_date', `A day range may cover at most ${MAX_DAYS} days.`);
  return { granularity, days: await usageByDay(db, projectId, new Date(start), new Date(end), query.customer) };
}

/** Sums per UTC day in [from, to), newest first; of one end customer's records when `customer` is given. */
export async function usageByDay(db: Tx, projectId: string | undefined, from: Date, to: Date, customer?: string): Promise<UsageDay[]> {
  const projectFilter = Prisma.sql`${projectId !== undefined ? Prisma.sql`AND project_id = ${projectId}` : Prisma.empty} ${
    customer !== undefined ? Prisma.sql`AND customer = ${customer}` : Prisma.empty
  }`;
  const rows = await db.$queryRaw<Array<{ day: string; requests: bigint; prompt: bigint; completion: bigint; cost: bigint }>>`
    SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
           count(*)::bigint AS requests,
           coalesce(sum(prompt_tokens), 0)::bigint AS prompt,
           coalesce(sum(completion_tokens), 0)::bigint AS completion,
           coalesce(sum(cost_micros), 0)::bigint AS cost
      FROM usage_records
     WHERE created_at >= ${from} AND created_at < ${to} ${projectFilter}
     GROUP BY 1
     ORDER BY 1 DESC`;
  return rows.map((r) => ({
    date: r.day,
    requests: Number(r.requests),
    promptTokens: Number(r.prompt),
    completionTokens: Number(r.completion),
    costMicros: BigInt(r.cost),
  }));
}
