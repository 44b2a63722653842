import { Type, type Static } from 'typebox';
import { Prisma } from '../../generated/prisma/client.ts';
import { says } from '../../config/schema-errors.ts';
import { invalid } from '../../errors/svc-error.ts';
import { visibleProjectId, type Ctx } from '../context.ts';
import { Input, ProjectIdFilter } from '../schema.ts';
import { parseInput } from '../validation.ts';
import type { UsagePorts } from './ports.ts';
import { DEFAULT_DAYS, MAX_DAYS, utcDate } from './service.ts';

/** What spend is split by: the dimensions of usage_daily (key_id, model, customer, route and status of usage_records). */
export const SPEND_DIMENSIONS = ['key', 'model', 'customer', 'route', 'status'] as const;
export type SpendDimension = (typeof SPEND_DIMENSIONS)[number];

const Day = (description: string) =>
  Type.Optional(Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$', description, ...says('must be a date as YYYY-MM-DD') }));

export const SpendQuery = Input({
  project_id: ProjectIdFilter,
  by: Type.Optional(Type.Enum([...SPEND_DIMENSIONS], { description: 'Split by key (default), model, customer, route or status.', ...says(`must be one of ${SPEND_DIMENSIONS.join(', ')}`) })),
  start_date: Day('The first day (UTC, inclusive), YYYY-MM-DD; default 29 days before end_date.'),
  end_date: Day('The last day (UTC, inclusive), YYYY-MM-DD; default today.'),
  top: Type.Optional(
    Type.Integer({ minimum: 1, maximum: 100, description: 'Keep the costliest `top` values; the others are summed as one (value null).', ...says('must be an integer between {minimum} and {maximum}') }),
  ),
});
export type SpendQuery = Static<typeof SpendQuery>;

export interface SpendFigures {
  requests: number;
  promptTokens: number;
  completionTokens: number;
  costMicros: bigint;
}
export interface SpendCell extends SpendFigures {
  /** YYYY-MM-DD (UTC). */
  date: string;
  /** The dimension's value: a key id, a model, a customer or a route ('' for none), or a status; null: the values past `top`. */
  value: string | null;
}
export interface SpendReport {
  by: SpendDimension;
  startDate: string;
  endDate: string;
  /** One row per day and value with usage, oldest day first. */
  cells: SpendCell[];
  /** Per value over the range, costliest first (the values past `top` last, as one with value null). */
  values: (SpendFigures & { value: string | null })[];
  /** How many values were summed as the one with value null (0 without `top`, or when all fit). */
  otherValues: number;
  totals: SpendFigures;
}

const DAY_MS = 86_400_000;

function dayMs(value: string, param: string): number {
  const ms = Date.parse(`${value}T00:00:00Z`);
  if (Number.isNaN(ms) || utcDate(new Date(ms)) !== value || ms < 0) throw invalid(param, `${param} must be a date as YYYY-MM-DD, 1970-01-01 or later.`);
  return ms;
}

type SpendRow = { day: string; value: string | null; requests: bigint; prompt: bigint; completion: bigint; cost: bigint };

async function countValues(db: Awaited<ReturnType<UsagePorts['reads']['client']>>, range: Prisma.Sql): Promise<number> {
  const [r] = await db.$queryRaw<{ n: bigint }[]>`SELECT count(DISTINCT value)::bigint AS n FROM usage_daily WHERE ${range}`;
  return Number(r?.n ?? 0);
}

const figures = (r: { requests: bigint; prompt: bigint; completion: bigint; cost: bigint }): SpendFigures => ({
  requests: Number(r.requests),
  promptTokens: Number(r.prompt),
  completionTokens: Number(r.completion),
  costMicros: BigInt(r.cost),
});

/**
 * Spend per UTC day and dimension value: one statement over usage_daily's primary key (project_id, dimension, day,
 * value). The per-value and overall totals are summed from those rows, not queried again.
 */
export async function spendReport(ports: UsagePorts, ctx: Ctx, raw: unknown): Promise<SpendReport> {
  const q = parseInput(SpendQuery, raw);
  const projectId = await visibleProjectId(ctx, q.project_id);
  const by = q.by ?? 'key';
  const end = q.end_date !== undefined ? dayMs(q.end_date, 'end_date') + DAY_MS : dayMs(utcDate(ctx.now()), 'end_date') + DAY_MS;
  const start = q.start_date !== undefined ? dayMs(q.start_date, 'start_date') : end - DEFAULT_DAYS * DAY_MS;
  if (start >= end) throw invalid('end_date', 'end_date must not be before start_date.');
  if (end - start > MAX_DAYS * DAY_MS) throw invalid('start_date', `A day range may cover at most ${MAX_DAYS} days.`);
  await ports.outcomes.flush({ timeoutMs: 500 });
  const db = await ports.reads.client();
  const projectFilter = projectId !== undefined ? Prisma.sql`AND project_id = ${projectId}` : Prisma.empty;
  // usage_daily holds each day's sums per dimension value (kept by a trigger on usage_records): a month of one
  // dimension is a few hundred rows to read, however many requests it counts. GROUP BY sums projects for the operator.
  const range = Prisma.sql`dimension = ${by} AND day >= ${utcDate(new Date(start))}::date AND day < ${utcDate(new Date(end))}::date ${projectFilter}`;
  // With `top`, the ranking and the folding of the rest into one value (NULL) happen in the same statement (window
  // functions, no join), so a dimension with thousands of values (customers) still answers a few hundred rows.
  const rows =
    q.top === undefined
      ? await db.$queryRaw<SpendRow[]>`
    SELECT to_char(day, 'YYYY-MM-DD') AS day, value,
           sum(requests)::bigint AS requests, sum(prompt_tokens)::bigint AS prompt,
           sum(completion_tokens)::bigint AS completion, sum(cost_micros)::bigint AS cost
      FROM usage_daily
     WHERE ${range}
     GROUP BY day, value
     ORDER BY day, value`
      : await db.$queryRaw<SpendRow[]>`
    WITH d AS (
      SELECT day, value, requests, prompt_tokens, completion_tokens, cost_micros,
             sum(cost_micros) OVER (PARTITION BY value COLLATE "C") AS value_cost,
             sum(requests) OVER (PARTITION BY value COLLATE "C") AS value_requests
        FROM usage_daily WHERE ${range}
    ), ranked AS (
      SELECT *, dense_rank() OVER (ORDER BY value_cost DESC, value_requests DESC, value COLLATE "C") AS n FROM d
    )
    SELECT to_char(day, 'YYYY-MM-DD') AS day,
           CASE WHEN n <= ${q.top} THEN value END AS value,
           sum(requests)::bigint AS requests, sum(prompt_tokens)::bigint AS prompt,
           sum(completion_tokens)::bigint AS completion, sum(cost_micros)::bigint AS cost
      FROM ranked
     GROUP BY 1, 2
     ORDER BY 1, 2`;
  const cells = rows.map((r) => ({ date: r.day, value: r.value, ...figures(r) }));
  const zero = (): SpendFigures => ({ requests: 0, promptTokens: 0, completionTokens: 0, costMicros: 0n });
  const add = (a: SpendFigures, b: SpendFigures) => {
    a.requests += b.requests;
    a.promptTokens += b.promptTokens;
    a.completionTokens += b.completionTokens;
    a.costMicros += b.costMicros;
  };
  const byValue = new Map<string | null, SpendFigures>();
  const totals = zero();
  for (const c of cells) {
    let v = byValue.get(c.value);
    if (!v) byValue.set(c.value, (v = zero()));
    add(v, c);
    add(totals, c);
  }
  const costliest = (a: SpendFigures & { value: string | null }, b: SpendFigures & { value: string | null }) =>
    (a.value === null) !== (b.value === null) ? (a.value === null ? 1 : -1)
      : a.costMicros !== b.costMicros ? (a.costMicros > b.costMicros ? -1 : 1)
        : a.requests !== b.requests ? b.requests - a.requests
          : String(a.value).localeCompare(String(b.value));
  const values = [...byValue].map(([value, f]) => ({ value, ...f })).sort(costliest);
  const otherValues = q.top === undefined ? 0 : Math.max(0, await countValues(db, range) - q.top);
  return { by, startDate: utcDate(new Date(start)), endDate: utcDate(new Date(end - DAY_MS)), cells, values, otherValues, totals };
}
