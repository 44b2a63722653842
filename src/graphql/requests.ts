import type { UsageRecord } from '../generated/prisma/client.ts';
import { getRequestDetail, listRequestLog, type RequestDetail, type TimelineStep } from '../domain/usage/requests.ts';
import type { RequestTimings } from '../domain/usage/outcome.ts';
import type { ProviderHop } from '../providers/router.ts';
import { builder } from './builder.ts';
import { serviceConnection } from './connections.ts';
import { listFilters } from './inputs.ts';
import { UsageRecordRef } from './usage.ts';

const TimelineStepRef = builder.objectRef<TimelineStep>('RequestTimelineStep').implement({
  description: "One step of a request's way through the gateway: from its recorded timings, or derived from its usage record.",
  fields: (t) => ({
    step: t.exposeString('step', { description: 'received, authenticated, validated, limits, cache, provider (one per hop), answered or outcome.' }),
    atMs: t.float({ description: 'Unix milliseconds when the step began.', resolve: (s) => s.atMs }),
    offsetMs: t.float({ description: "Milliseconds from the request's start.", resolve: (s) => s.offsetMs }),
    durationMs: t.float({ nullable: true, description: 'How long the step took (ms); null on records written before timings were kept.', resolve: (s) => s.durationMs }),
    status: t.exposeString('status', { description: 'ok, failed or skipped.' }),
    detail: t.exposeString('detail'),
  }),
});

const ProviderHopRef = builder.objectRef<ProviderHop>('RequestProviderHop').implement({
  description: 'One provider hop of a request: fallbacks and circuit-open skips included.',
  fields: (t) => ({
    route: t.exposeString('route', { description: '<provider>/<model>.' }),
    model: t.exposeString('model'),
    startMs: t.float({ description: "When it began (ms from the request's start).", resolve: (h) => h.startMs }),
    durationMs: t.float({ description: 'How long it took (ms).', resolve: (h) => h.durationMs }),
    outcome: t.exposeString('outcome', { description: 'ok, error, timeout, rejected, aborted or circuit_open.' }),
    error: t.exposeString('error', { nullable: true, description: 'What failed: http_<status>, or connection, timeout, protocol…; null when ok.' }),
  }),
});

const ms = (description: string) => `${description} (ms from the request's start)`;
const RequestTimingsRef = builder.objectRef<RequestTimings>('RequestTimings').implement({
  description: "Where a request spent its time, on a monotonic clock from the auth hook's start (for background work, the inference's).",
  fields: (t) => ({
    authenticatedMs: t.float({ nullable: true, description: ms('End of the auth hook; null for background work'), resolve: (x) => x.authenticatedMs }),
    validatedMs: t.float({ description: ms('The body read and validated: the inference began'), resolve: (x) => x.validatedMs }),
    admittedMs: t.float({ nullable: true, description: ms('Budget, cache lookup and token reservation passed; null when it stopped before'), resolve: (x) => x.admittedMs }),
    hops: t.field({ type: [ProviderHopRef], resolve: (x) => [...x.hops] }),
    answeredMs: t.float({ nullable: true, description: ms('The answer was complete; null when none came'), resolve: (x) => x.answeredMs }),
    totalMs: t.float({ description: ms('The outcome handed to the usage writer'), resolve: (x) => x.totalMs }),
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
    traceId: t.exposeString('traceId', {
      nullable: true,
      description: "The request's W3C trace id: the gateway's trace (X-Svc-Trace-Id) when tracing exported it, else the caller's traceparent trace id, else null.",
    }),
    timings: t.field({
      type: RequestTimingsRef,
      nullable: true,
      description: 'Where the request spent its time, with its provider hops; null on records written before timings were kept.',
      resolve: (d) => d.timings,
    }),
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
