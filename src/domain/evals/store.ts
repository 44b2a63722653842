import { Prisma, type EvalCase, type EvalRun } from '../../generated/prisma/client.ts';
import type { Db, Tx } from '../../db/client.ts';
import { claimLeases, renewLease } from '../../db/leases.ts';
import { invalid } from '../../errors/svc-error.ts';
import type { Page } from '../pagination.ts';
import { normalizePageQuery, type PageQuery } from '../pagination.ts';

/** The run's figures (CONTRACT §14's summary), in micro-dollars until presented. */
export interface EvalSummary {
  total: number;
  passed: number;
  failed: number;
  errored: number;
  costMicros: bigint;
  latencyP50Ms: number | null;
}

export const TERMINAL = ['completed', 'failed', 'canceled'] as const;
export const isTerminal = (status: string) => (TERMINAL as readonly string[]).includes(status);

/** The median of the latencies (the lower middle of an even count); null when none. */
export function median(values: number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

/** The summary from the run's cases as they are now. */
export async function summarize(db: Db | Tx, run: Pick<EvalRun, 'id' | 'total'>): Promise<EvalSummary> {
  const rows = await db.evalCase.findMany({
    where: { runId: run.id, status: { in: ['passed', 'failed', 'errored'] } },
    select: { status: true, costMicros: true, latencyMs: true },
  });
  const s: EvalSummary = { total: run.total, passed: 0, failed: 0, errored: 0, costMicros: 0n, latencyP50Ms: null };
  const latencies: number[] = [];
  for (const r of rows) {
    s[r.status as 'passed' | 'failed' | 'errored']++;
    s.costMicros += r.costMicros;
    if (r.latencyMs !== null && r.status !== 'errored') latencies.push(r.latencyMs);
  }
  s.latencyP50Ms = median(latencies);
  return s;
}

/** The stored figures of an ended run, or the live ones of a run still going. */
export async function summaryOf(db: Db | Tx, run: EvalRun): Promise<EvalSummary> {
  if (isTerminal(run.status)) {
    return { total: run.total, passed: run.passed, failed: run.failed, errored: run.errored, costMicros: run.costMicros, latencyP50Ms: run.latencyP50Ms };
  }
  return summarize(db, run);
}

export const summaryColumns = (s: EvalSummary) => ({
  passed: s.passed,
  failed: s.failed,
  errored: s.errored,
  costMicros: s.costMicros,
  latencyP50Ms: s.latencyP50Ms,
});

export function findRun(db: Db | Tx, runId: string, projectId: string | undefined): Promise<EvalRun | null> {
  return db.evalRun.findFirst({ where: { id: runId, ...(projectId !== undefined ? { projectId } : {}) } });
}

/**
 * A run's results in case order (ids are made in case order): starting_after gives the next cases, ending_before the
 * ones just before the cursor. Same limits and cursor checks as every list (domain/pagination.ts).
 */
export async function pageCases(db: Db, runId: string, query: PageQuery): Promise<Page<EvalCase>> {
  const q = normalizePageQuery(query);
  const cursor = q.starting_after ?? q.ending_before;
  if (cursor !== undefined && (await db.evalCase.count({ where: { runId, id: cursor } })) === 0) {
    const param = q.starting_after !== undefined ? 'starting_after' : 'ending_before';
    throw invalid(param, `${param} does not name a result of this run.`);
  }
  if (q.ending_before !== undefined) {
    const rows = await db.evalCase.findMany({ where: { runId, id: { lt: q.ending_before } }, orderBy: { id: 'desc' }, take: q.limit + 1 });
    return { data: rows.slice(0, q.limit).reverse(), hasMore: rows.length > q.limit, limit: q.limit };
  }
  const where: Prisma.EvalCaseWhereInput = q.starting_after !== undefined ? { runId, id: { gt: q.starting_after } } : { runId };
  const rows = await db.evalCase.findMany({ where, orderBy: { id: 'asc' }, take: q.limit + 1 });
  return { data: rows.slice(0, q.limit), hasMore: rows.length > q.limit, limit: q.limit };
}

/**
 * Leases a queued run, or a running one whose lease has passed (its worker died), to `owner` until `until`, in one
 * statement (db/leases.ts): replicas claiming at once never take the same run. Never one of `excluding` (the runs this
 * process works on: a lease may pass while an embedded database holds the event loop up, and a second worker on the
 * same run would make the same calls again).
 */
export async function claimRun(db: Db, now: Date, until: Date, owner: string, excluding: string[]): Promise<EvalRun | null> {
  const [row] = await claimLeases(db, 'eval_runs', {
    now,
    until,
    limit: 1,
    owner,
    due: Prisma.sql`d.status IN ('queued', 'running')${excluding.length > 0 ? Prisma.sql` AND d.id <> ALL(${excluding}::text[])` : Prisma.empty}`,
    orderBy: Prisma.sql`d.id`,
    set: Prisma.sql`status = 'running', started_at = COALESCE(u.started_at, ${now})`,
  });
  return row ? db.evalRun.findUnique({ where: { id: row.id } }) : null;
}

/** Renews the lease of a run `owner` holds; false when the run is no longer its own (canceled, or taken over). */
export function renewRun(db: Db, runId: string, owner: string, until: Date): Promise<boolean> {
  return renewLease(db, 'eval_runs', { id: runId, owner }, until, { status: 'running' });
}
