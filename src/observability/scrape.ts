import type { Db } from '../db/client.ts';
import type { OutcomeStats } from '../domain/usage/ports.ts';
import type { Redis } from '../redis/connection.ts';
import { redisHealthOf } from '../redis/health.ts';
import { MICROS_PER_USD } from '../kernel/money.ts';

/** Shared state read when /metrics is scraped (never on the request path). */
export interface ScrapeReadings {
  databaseUp: boolean;
  databasePingS: number | null;
  /** null without REDIS_URL. */
  redisUp: boolean | null;
  budgets: { projectId: string; budgetUsd: number; spentUsd: number }[];
  /** The end customers with the highest spend this month, at most SVC_METRICS_TOP_CUSTOMERS (CONTRACT §22). */
  customers: { projectId: string; customer: string; spentUsd: number }[];
  webhookBacklog: Record<'pending' | 'retrying', number>;
  outcomeStream: { length: number; pending: number } | null;
  outcomes: OutcomeStats;
}

export interface ScrapeSources {
  db: Db;
  redis: Redis | null;
  /** The usage stream's shards (one key on one server; SVC_USAGE_STREAM_SHARDS on a cluster): summed. */
  outcomeStreams: readonly string[];
  now: () => number;
  outcomes: () => OutcomeStats;
  /** SVC_METRICS_TOP_CUSTOMERS: how many customers the customer gauge shows (0 or absent: none). */
  topCustomers?: number;
}

/** Each reading gives up after this long, so a hanging dependency shows as down instead of stalling the scrape. */
export const SCRAPE_TIMEOUT_MS = 1_000;

function within<T>(p: Promise<T>, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(fallback), SCRAPE_TIMEOUT_MS);
  });
  return Promise.race([p.catch(() => fallback), timeout]).finally(() => clearTimeout(timer));
}

const periodOf = (ms: number) => new Date(ms).toISOString().slice(0, 7);

/**
 * One statement each: the projects that have a budget with this month's spend (budget_spend, the durable record the
 * usage batches update; the request path's counters may be a batch ahead), and the open webhook deliveries (the
 * (status, next_attempt_at) index). Both are the same on every replica.
 */
async function budgets(db: Db, period: string): Promise<ScrapeReadings['budgets']> {
  const rows = await db.$queryRaw<{ project_id: string; budget_micros: unknown; spent_micros: unknown }[]>`
    SELECT p.id AS project_id, p.budget_micros, COALESCE(s.spent_micros, 0) AS spent_micros
      FROM projects p
      LEFT JOIN budget_spend s ON s.scope = 'project:' || p.id AND s.period = ${period}
     WHERE p.budget_micros IS NOT NULL AND p.status = 'active'
     ORDER BY p.id`;
  return rows.map((r) => ({
    projectId: r.project_id,
    budgetUsd: Number(r.budget_micros) / MICROS_PER_USD,
    spentUsd: Number(r.spent_micros) / MICROS_PER_USD,
  }));
}

/**
 * The `limit` end customers with the highest spend this month across the gateway (budget_spend's customer scopes): a
 * bounded set of label values however many customers there are.
 */
async function topCustomers(db: Db, period: string, limit: number): Promise<ScrapeReadings['customers']> {
  if (limit <= 0) return [];
  const rows = await db.$queryRaw<{ project_id: string; customer: string; spent_micros: unknown }[]>`
    SELECT project_id, substr(scope, length('customer:' || project_id || ':') + 1) AS customer, spent_micros
      FROM budget_spend
     WHERE period = ${period} AND scope LIKE 'customer:%'
     ORDER BY spent_micros DESC, scope
     LIMIT ${limit}`;
  return rows.map((r) => ({ projectId: r.project_id, customer: r.customer, spentUsd: Number(r.spent_micros) / MICROS_PER_USD }));
}

async function webhookBacklog(db: Db): Promise<ScrapeReadings['webhookBacklog']> {
  const rows = await db.$queryRaw<{ status: string; n: unknown }[]>`
    SELECT status, count(*) AS n FROM webhook_deliveries WHERE status IN ('pending', 'retrying') GROUP BY status`;
  const out = { pending: 0, retrying: 0 };
  for (const r of rows) out[r.status as 'pending' | 'retrying'] = Number(r.n);
  return out;
}

async function outcomeStream(redis: Redis, streams: readonly string[]): Promise<ScrapeReadings['outcomeStream']> {
  const shards = await Promise.all(
    streams.map((stream) =>
      Promise.all([
        redis.xlen(stream),
        (redis.xpending(stream, 'writers') as Promise<[number, ...unknown[]]>).catch(() => [0] as [number]),
      ]),
    ),
  );
  return shards.reduce((sum, [length, pending]) => ({ length: sum.length + length, pending: sum.pending + Number(pending[0]) }), { length: 0, pending: 0 });
}

export async function readScrape(s: ScrapeSources): Promise<ScrapeReadings> {
  const started = performance.now();
  const ping = within(
    s.db.$queryRaw`SELECT 1`.then(() => performance.now() - started),
    null,
  );
  const redisUsable = s.redis ? redisHealthOf(s.redis).usable : null;
  const [pingMs, budgetRows, backlog, stream, customers] = await Promise.all([
    ping,
    within(budgets(s.db, periodOf(s.now())), []),
    within(webhookBacklog(s.db), { pending: 0, retrying: 0 }),
    s.redis && redisUsable ? within(outcomeStream(s.redis, s.outcomeStreams), null) : Promise.resolve(null),
    within(topCustomers(s.db, periodOf(s.now()), s.topCustomers ?? 0), []),
  ]);
  return {
    databaseUp: pingMs !== null,
    databasePingS: pingMs === null ? null : pingMs / 1000,
    redisUp: redisUsable,
    budgets: budgetRows,
    customers,
    webhookBacklog: backlog,
    outcomeStream: stream,
    outcomes: s.outcomes(),
  };
}
