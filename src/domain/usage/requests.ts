import { Type, type Static } from 'typebox';
import { Prisma, type UsageRecord } from '../../generated/prisma/client.ts';
import { says } from '../../config/schema-errors.ts';
import { invalid, SvcError } from '../../errors/svc-error.ts';
import type { Ctx } from '../context.ts';
import { paginate, pageQueryProperties, type Page } from '../pagination.ts';
import { Input, ProjectIdFilter } from '../schema.ts';
import { addressed, visibleProjectId } from '../tenancy.ts';
import { parseInput } from '../validation.ts';
import type { UsagePorts } from './ports.ts';

const Text = (description: string) =>
  Type.Optional(Type.String({ minLength: 1, maxLength: 200, description, ...says('must be a string of 1 to 200 characters') }));
const Unix = (description: string) =>
  Type.Optional(Type.Integer({ minimum: 0, description, ...says('must be a Unix time in seconds') }));

/** The request log's filters (the console's Requests screen): usage records, newest first. */
export const RequestLogQuery = Input({
  ...pageQueryProperties(),
  project_id: ProjectIdFilter,
  model: Text('Only this model (the one that answered, or the one asked for when none did).'),
  key_id: Text('Only requests made with this key.'),
  route: Text('Only this route, <provider>/<model>.'),
  customer: Text('Only requests that named this end customer.'),
  status: Type.Optional(Type.Enum(['succeeded', 'failed'], { description: 'succeeded or failed.', ...says('must be succeeded or failed') })),
  error_code: Text('Only failed requests with this error code.'),
  cache_hit: Type.Optional(Type.Boolean({ description: 'Only cache hits (true) or misses (false).', ...says('must be a boolean') })),
  created_gte: Unix('Requests created at or after this Unix second.'),
  created_lt: Unix('Requests created before this Unix second.'),
});
export type RequestLogQuery = Static<typeof RequestLogQuery>;

function logWhere(projectId: string | undefined, q: RequestLogQuery): Prisma.UsageRecordWhereInput {
  if (q.created_gte !== undefined && q.created_lt !== undefined && q.created_gte >= q.created_lt) {
    throw invalid('created_lt', 'created_lt must be after created_gte.');
  }
  return {
    ...(projectId !== undefined ? { projectId } : {}),
    ...(q.model !== undefined ? { model: q.model } : {}),
    ...(q.key_id !== undefined ? { keyId: q.key_id } : {}),
    ...(q.route !== undefined ? { route: q.route } : {}),
    ...(q.customer !== undefined ? { customer: q.customer } : {}),
    ...(q.status !== undefined ? { status: q.status } : {}),
    ...(q.error_code !== undefined ? { errorCode: q.error_code } : {}),
    ...(q.cache_hit !== undefined ? { cacheHit: q.cache_hit } : {}),
    ...(q.created_gte !== undefined || q.created_lt !== undefined
      ? {
          createdAt: {
            ...(q.created_gte !== undefined ? { gte: new Date(q.created_gte * 1000) } : {}),
            ...(q.created_lt !== undefined ? { lt: new Date(q.created_lt * 1000) } : {}),
          },
        }
      : {}),
  };
}

/**
 * The request log: usage records newest first, filtered; cursor request_id (time-ordered). Served by the
 * (project_id, request_id) index of every monthly partition: a page reads `limit + 1` rows whatever the table's size.
 */
export async function listRequestLog(ports: UsagePorts, ctx: Ctx, raw: unknown): Promise<Page<UsageRecord>> {
  const query = parseInput(RequestLogQuery, raw);
  const projectId = await visibleProjectId(ctx, query.project_id);
  const where = logWhere(projectId, query);
  // Read-your-writes, but never long: the log polls.
  await ports.outcomes.flush({ timeoutMs: 500 });
  const db = await ports.reads.client();
  return paginate(query, {
    cursorField: 'request_id',
    fetch: ({ cursor, order, take }) =>
      db.usageRecord.findMany({ where: { ...where, ...(cursor ? { requestId: cursor } : {}) }, orderBy: { requestId: order }, take }),
    exists: async (requestId) => (await db.usageRecord.count({ where: { ...where, requestId } })) > 0,
  });
}

/** One step of a request's timeline, as far as the usage record tells it. */
export interface TimelineStep {
  /** received, authenticated, limits, cache, provider, outcome. */
  step: string;
  /** Unix milliseconds. */
  atMs: number;
  status: 'ok' | 'failed' | 'skipped';
  detail: string;
}

export interface RequestDetail {
  record: UsageRecord;
  /** The inference's inf_ id when its content was retained (read it with GET /v1/inference/{id}); else null. */
  inferenceId: string | null;
  /** Whether the retained record still holds content (it may have been purged or stored under zero retention). */
  contentRetained: boolean;
  timeline: TimelineStep[];
}

/** Error codes that the limits stage answers (the request never reached a provider). */
const LIMIT_CODES = new Set(['rate_limit_exceeded', 'budget_exceeded', 'project_archived']);

/** The steps a request went through, from its usage record: where it stopped, which route answered, how long it took. */
export function timelineOf(r: UsageRecord): TimelineStep[] {
  const start = r.createdAt.getTime();
  const end = start + r.latencyMs;
  const failed = r.status === 'failed';
  const stoppedAtLimits = failed && r.errorCode !== null && LIMIT_CODES.has(r.errorCode);
  const steps: TimelineStep[] = [
    { step: 'received', atMs: start, status: 'ok', detail: `Request ${r.requestId} for model ${r.model}.` },
    { step: 'authenticated', atMs: start, status: 'ok', detail: `Key ${r.keyId}${r.customer ? ` for customer ${r.customer}` : ''}.` },
    stoppedAtLimits
      ? { step: 'limits', atMs: start, status: 'failed', detail: `Refused: ${r.errorCode}.` }
      : { step: 'limits', atMs: start, status: 'ok', detail: 'Within the rate limits and budgets.' },
  ];
  if (stoppedAtLimits) {
    steps.push({ step: 'outcome', atMs: end, status: 'failed', detail: `Failed with ${r.errorCode} after ${r.latencyMs} ms.` });
    return steps;
  }
  steps.push(
    r.cacheHit
      ? { step: 'cache', atMs: start, status: 'ok', detail: 'Answered from the response cache: no provider was called.' }
      : { step: 'cache', atMs: start, status: 'skipped', detail: 'Not answered from the cache.' },
  );
  if (!r.cacheHit) {
    steps.push(
      r.route
        ? {
            step: 'provider',
            atMs: start,
            status: failed ? 'failed' : 'ok',
            detail: `${failed ? 'Last tried' : 'Answered by'} ${r.route}${r.region ? ` in ${r.region}` : ''}.`,
          }
        : { step: 'provider', atMs: start, status: failed ? 'failed' : 'skipped', detail: 'No provider was reached.' },
    );
  }
  steps.push(
    failed
      ? { step: 'outcome', atMs: end, status: 'failed', detail: `Failed with ${r.errorCode ?? 'an error'} after ${r.latencyMs} ms.` }
      : {
          step: 'outcome',
          atMs: end,
          status: 'ok',
          detail: `Succeeded in ${r.latencyMs} ms: ${r.promptTokens} prompt and ${r.completionTokens} completion tokens.`,
        },
  );
  return steps;
}

/**
 * One request of the log with its timeline and where its retained content is. Another project's request id is
 * 404 not_found (never revealed).
 */
export async function getRequestDetail(ports: UsagePorts, ctx: Ctx, requestId: string): Promise<RequestDetail> {
  const projectId = await visibleProjectId(ctx, null);
  const find = async () => {
    const db = await ports.reads.client();
    return db.usageRecord.findFirst({ where: { requestId, ...(projectId !== undefined ? { projectId } : {}) } });
  };
  let record = await find();
  if (!record) {
    await ports.outcomes.flush({ timeoutMs: 2_000 });
    record = await find();
  }
  if (!record) throw new SvcError('not_found', { param: 'request_id', message: 'No such request.' });
  addressed(ctx, record.projectId);
  const retained = await ctx.db.retainedInference.findFirst({
    where: { projectId: record.projectId, requestId },
    select: { id: true, sealed: true },
  });
  return { record, inferenceId: retained?.id ?? null, contentRetained: retained?.sealed != null, timeline: timelineOf(record) };
}
