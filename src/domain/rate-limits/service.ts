import type { Db } from '../../db/client.ts';
import { SvcError } from '../../errors/svc-error.ts';
import type { RateLimits, VersionedLimits } from '../../limits/store.ts';
import { recordAudit } from '../audit/service.ts';
import { ownTransaction, requireProjectId, type Ctx, type Checked } from '../context.ts';
import type { RateLimitPorts } from './ports.ts';
import { enqueueEvent } from '../events/outbox.ts';
import { parseInput } from '../validation.ts';
import { UpdateRateLimits } from './schema.ts';

const notFound = () => new SvcError('not_found', { param: 'project_id', message: 'No such project.' });

/** Spec 8.1.2; CONTRACT §7: enterprise has growth's figures until set, burst 0. */
export const PLAN_LIMITS: Record<string, RateLimits> = {
  starter: { requestsPerMinute: 60, tokensPerMinute: 100_000, burst: 0 },
  growth: { requestsPerMinute: 300, tokensPerMinute: 500_000, burst: 0 },
  enterprise: { requestsPerMinute: 300, tokensPerMinute: 500_000, burst: 0 },
};

export interface ProjectRateLimits extends RateLimits {
  projectId: string;
  /** null while the plan defaults apply. */
  updatedAt: Date | null;
}

const LIMIT_COLUMNS = {
  plan: true,
  requestsPerMinute: true,
  tokensPerMinute: true,
  burst: true,
  rateLimitsUpdatedAt: true,
} as const;

type LimitRow = {
  plan: string;
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
  burst: number | null;
  rateLimitsUpdatedAt: Date | null;
};

function effective(row: LimitRow): RateLimits & { updatedAt: Date | null } {
  const plan = PLAN_LIMITS[row.plan] ?? PLAN_LIMITS.starter!;
  return {
    requestsPerMinute: row.requestsPerMinute ?? plan.requestsPerMinute,
    tokensPerMinute: row.tokensPerMinute ?? plan.tokensPerMinute,
    burst: row.burst ?? plan.burst,
    updatedAt: row.rateLimitsUpdatedAt,
  };
}

/** What the limiter enforces for a project; version is the last update's time in ms (0: plan defaults). */
export async function loadProjectLimits(db: Db, projectId: string): Promise<VersionedLimits> {
  const row = await db.project.findUnique({ where: { id: projectId }, select: LIMIT_COLUMNS });
  const limits = effective(row ?? { plan: 'starter', requestsPerMinute: null, tokensPerMinute: null, burst: null, rateLimitsUpdatedAt: null });
  return {
    requestsPerMinute: limits.requestsPerMinute,
    tokensPerMinute: limits.tokensPerMinute,
    burst: limits.burst,
    version: limits.updatedAt?.getTime() ?? 0,
  };
}

export async function getRateLimits(ctx: Ctx, projectId: string): Promise<ProjectRateLimits> {
  const id = await requireProjectId(ctx, projectId);
  const row = await ctx.db.project.findUnique({ where: { id }, select: LIMIT_COLUMNS });
  if (!row) throw notFound();
  return { projectId: id, ...effective(row) };
}

export interface RateLimitsChange extends Checked {
  limits: RateLimits;
}

/** updateRateLimits' validation (the input, the project, that it exists), writing nothing (domain/governance). */
export async function checkRateLimits(_ports: RateLimitPorts, ctx: Ctx, projectId: string, raw: unknown): Promise<RateLimitsChange> {
  const input = parseInput(UpdateRateLimits, raw);
  const limits = { requestsPerMinute: input.requests_per_minute, tokensPerMinute: input.tokens_per_minute, burst: input.burst };
  const id = await requireProjectId(ctx, projectId);
  if (!(await ctx.db.project.findUnique({ where: { id }, select: { id: true } }))) throw notFound();
  return { projectId: id, limits };
}

/** updateRateLimits' change, as checkRateLimits validated it. */
export async function applyRateLimits(ports: RateLimitPorts, ctx: Ctx, change: RateLimitsChange, transact = ownTransaction(ctx)): Promise<ProjectRateLimits> {
  const { projectId: id, limits } = change;
  const now = ctx.now();
  const updated = await transact(async (tx) => {
    const before = await tx.project.findUnique({ where: { id }, select: { rateLimitsUpdatedAt: true } });
    if (!before) throw notFound();
    // The update time is the limits' version: strictly increasing, even for two updates within one millisecond.
    const previous = before.rateLimitsUpdatedAt?.getTime() ?? 0;
    const updatedAt = new Date(Math.max(now.getTime(), previous + 1));
    await tx.project.update({ where: { id }, data: { ...limits, rateLimitsUpdatedAt: updatedAt } });
    const data = {
      policy: 'rate_limits',
      requests_per_minute: limits.requestsPerMinute,
      tokens_per_minute: limits.tokensPerMinute,
      burst: limits.burst,
    };
    await recordAudit(tx, ctx, 'policy.updated', { projectId: id, targetId: id, data });
    await enqueueEvent(tx, now, id, 'policy.updated', data);
    return { projectId: id, ...limits, updatedAt };
  });
  // After commit: a replica that reloads the limits must already read the new row.
  await ports.limiter.limitsChanged(id, { ...limits, version: updated.updatedAt.getTime() });
  return updated;
}

/**
 * Sets all three limits (CONTRACT §7). Audits policy.updated and emits policy.updated in the same transaction. The
 * next request on every replica uses them, with the project's and its keys' windows started afresh.
 */
export async function updateRateLimits(ports: RateLimitPorts, ctx: Ctx, projectId: string, raw: unknown): Promise<ProjectRateLimits> {
  return applyRateLimits(ports, ctx, await checkRateLimits(ports, ctx, projectId, raw));
}
