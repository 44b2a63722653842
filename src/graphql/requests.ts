import type { UsageRecord } from '../generated/prisma/client.ts';
import { getRequestDetail, listRequestLog, type RequestDetail, type TimelineStep } from '../domain/usage/requests.ts';
import { builder } from './builder.ts';
import { serviceConnection } from './connections.ts';
import { listFilters } from './inputs.ts';
import { UsageRecordRef } from './usage.ts';

const TimelineStepRef = builder.objectRef<TimelineStep>('RequestTimelineStep').implement({
  description: "One step of a request's way through the gateway, as its usage record tells it.",
  fields: (t) => ({
    step: t.exposeString('step', { description: 'received, authenticated, limits, cache, provider or outcome.' }),
    atMs: t.float({ description: 'Unix milliseconds.', resolve: (s) => s.atMs }),
    status: t.exposeString('status', { description: 'ok, failed or skipped.' }),
    detail: t.exposeString('detail'),
  }),
});

const RequestDetailRef = builder.objectRef<RequestDetail>('RequestDetail').implement({
  description: 'One request of the log: its usage record, its timeline and where its retained content is.',
  fields: (t) => ({
    record: t.field({ type: UsageRecordRef, resolve: (d) => d.record }),
    inferenceId: t.exposeID('inferenceId', {
      nullable: true,
      description: 'The inf_ id of its retained record (inference(id) reads the content, inference:read); null when none was kept.',
    }),
    contentRetained: t.exposeBoolean('contentRetained', { description: 'Whether the retained record still holds the request and answer.' }),
    timeline: t.field({ type: [TimelineStepRef], resolve: (d) => d.timeline }),
  }),
});

builder.queryFields((t) => ({
  requestLog: t.connection(
    {
      type: UsageRecordRef,
      nullable: true,
      authScopes: { action: 'usage.read' },
      description: "The request log: the project's usage records newest first, filtered (the console's Requests screen).",
      args: {
        projectId: t.arg.id(),
        model: t.arg.string(),
        keyId: t.arg.id(),
        route: t.arg.string(),
        customer: t.arg.string({ description: 'The end customer the requests named.' }),
        status: t.arg.string({ description: 'succeeded or failed.' }),
        errorCode: t.arg.string(),
        cacheHit: t.arg.boolean(),
        createdGte: t.arg({ type: 'UnixSeconds' }),
        createdLt: t.arg({ type: 'UnixSeconds' }),
      },
      resolve: (_root, args, { ctx, ports }) =>
        serviceConnection(args, (query) => listRequestLog(ports.usage, ctx, { ...query, ...listFilters(args) }), (u: UsageRecord) => u.requestId),
    },
    { name: 'RequestLogConnection' },
    { name: 'RequestLogEdge' },
  ),
  requestDetail: t.field({
    type: RequestDetailRef,
    nullable: true,
    authScopes: { action: 'usage.read' },
    description: 'One request of the log by its request id (req_…): another project\'s is not_found.',
    args: { requestId: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx, ports }) => getRequestDetail(ports.usage, ctx, String(args.requestId)),
  }),
}));
