import { Type, type Static } from 'typebox';
import { Prisma, type UsageRecord } from '../../generated/prisma/client.ts';
import { says } from '../../config/schema-errors.ts';
import { invalid, SvcError } from '../../errors/svc-error.ts';
import { addressed, visibleProjectId, type Ctx } from '../context.ts';
import { paginate, pageQueryProperties, type Page } from '../pagination.ts';
import { Input, ProjectIdFilter } from '../schema.ts';
import { parseInput } from '../validation.ts';
import type { UsagePorts } from './ports.ts';
import { readTimings, timelineOf, type TimelineStep } from './timeline.ts';
import type { RequestTimings } from './outcome.ts';

export type { TimelineStep } from './timeline.ts';

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

export interface RequestDetail {
  record: UsageRecord;
  /** The inference's inf_ id when its content was retained (read it with GET /v1/inference/{id}); else null. */
  inferenceId: string | null;
  /** Whether the retained record still holds content (it may have been purged or stored under zero retention). */
  contentRetained: boolean;
  /** The request's W3C trace id (domain/inference/tracker.ts traceIdOf); null when it had none or was recorded before it was kept. */
  traceId: string | null;
  /** Where it spent its time, with its provider hops; null on records written before timings were kept. */
  timings: RequestTimings | null;
  timeline: TimelineStep[];
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
  return {
    record,
    inferenceId: retained?.id ?? null,
    contentRetained: retained?.sealed != null,
    traceId: record.traceId,
    timings: readTimings(record.timings),
    timeline: timelineOf(record),
  };
}
