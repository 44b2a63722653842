import type { UsageRecord } from '../generated/prisma/client.ts';
import { listUsage, type UsageDay } from '../domain/usage/service.ts';
import { microsToUsd } from '../kernel/money.ts';
import { builder } from './builder.ts';
import { serviceConnection } from './connections.ts';
import { listFilters } from './inputs.ts';

/** CONTRACT §8's usage record; its cursor is the request id (spec 4.5). */
export const UsageRecordRef = builder.prismaObject('UsageRecord', {
  fields: (t) => ({
    requestId: t.exposeID('requestId'),
    projectId: t.exposeID('projectId'),
    keyId: t.exposeID('keyId'),
    model: t.exposeString('model'),
    route: t.exposeString('route', { nullable: true }),
    region: t.exposeString('region', { nullable: true }),
    cacheHit: t.exposeBoolean('cacheHit'),
    status: t.exposeString('status', { description: 'succeeded or failed.' }),
    errorCode: t.exposeString('errorCode', { nullable: true }),
    promptTokens: t.exposeInt('promptTokens'),
    completionTokens: t.exposeInt('completionTokens'),
    costUsd: t.float({ resolve: (u) => microsToUsd(u.costMicros) }),
    latencyMs: t.exposeInt('latencyMs'),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    templateId: t.exposeID('templateId', { nullable: true, description: 'The prompt template the inference used.' }),
    templateVersion: t.exposeInt('templateVersion', { nullable: true }),
    customer: t.exposeString('customer', { nullable: true, description: 'The end customer the inference named (CONTRACT §22).' }),
  }),
});

const UsageDayRef = builder.objectRef<UsageDay>('UsageDay').implement({
  fields: (t) => ({
    date: t.exposeString('date', { description: 'YYYY-MM-DD (UTC).' }),
    requests: t.exposeInt('requests'),
    promptTokens: t.exposeInt('promptTokens'),
    completionTokens: t.exposeInt('completionTokens'),
    costUsd: t.float({ resolve: (d) => microsToUsd(d.costMicros) }),
  }),
});

builder.queryFields((t) => ({
  usage: t.connection(
    {
      type: UsageRecordRef,
      nullable: true,
      authScopes: { action: 'usage.read' },
      description: 'Usage records newest first (GET /v1/usage?granularity=request); startDate/endDate are YYYY-MM-DD, inclusive.',
      args: { projectId: t.arg.id(), startDate: t.arg.string(), endDate: t.arg.string(), customer: t.arg.string({ description: 'Only this end customer\'s records.' }) },
      resolve: (_root, args, { ctx, ports }) =>
        serviceConnection(
          args,
          async (query) => {
            const usage = await listUsage(ports.usage, ctx, { ...query, ...listFilters(args), granularity: 'request' });
            return usage.granularity === 'request' ? usage.page : { data: [], hasMore: false, limit: 0 };
          },
          (u: UsageRecord) => u.requestId,
        ),
    },
    { name: 'UsageRecordConnection' },
    { name: 'UsageRecordEdge' },
  ),
  usageByDay: t.field({
    type: [UsageDayRef],
    nullable: true,
    authScopes: { action: 'usage.read' },
    description: 'One row per UTC day with usage, newest first (GET /v1/usage?granularity=day): the last 30 days by default.',
    args: { projectId: t.arg.id(), startDate: t.arg.string(), endDate: t.arg.string(), customer: t.arg.string({ description: 'Only this end customer\'s usage.' }) },
    resolve: async (_root, args, { ctx, ports }) => {
      const usage = await listUsage(ports.usage, ctx, { ...listFilters(args), granularity: 'day' });
      return usage.granularity === 'day' ? usage.days : [];
    },
  }),
}));
