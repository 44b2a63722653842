import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { PathId } from '../../domain/schema.ts';
import { getRequestDetail, listRequestLog, RequestLogQuery, type RequestDetail } from '../../domain/usage/requests.ts';
import type { RequestTimings } from '../../domain/usage/outcome.ts';
import { spendReport, SpendQuery, type SpendCell, type SpendFigures, type SpendReport } from '../../domain/usage/spend.ts';
import { microsToUsd } from '../../kernel/money.ts';
import { ListOf, sendList } from '../list.ts';
import { Nullable, NullableStr, Num, Str } from '../response-fields.ts';
import { presentUsageRecord, UsageRecordObject } from './usage.ts';

const RequestIdParams = PathId('request_id', 'The request id (req_…) of a usage record.');

const figures = (f: SpendFigures) => ({
  requests: f.requests,
  prompt_tokens: f.promptTokens,
  completion_tokens: f.completionTokens,
  cost_usd: microsToUsd(f.costMicros),
});

const presentTimings = (t: RequestTimings) => ({
  authenticated_ms: t.authenticatedMs,
  validated_ms: t.validatedMs,
  admitted_ms: t.admittedMs,
  hops: t.hops.map((h) => ({ route: h.route, model: h.model, start_ms: h.startMs, duration_ms: h.durationMs, outcome: h.outcome, error: h.error })),
  answered_ms: t.answeredMs,
  total_ms: t.totalMs,
});

export function presentRequestDetail(d: RequestDetail) {
  return {
    object: 'svc.request_detail' as const,
    record: presentUsageRecord(d.record),
    inference_id: d.inferenceId,
    content_retained: d.contentRetained,
    trace_id: d.traceId,
    timings: d.timings ? presentTimings(d.timings) : null,
    timeline: d.timeline.map((s) => ({ step: s.step, at_ms: s.atMs, offset_ms: s.offsetMs, duration_ms: s.durationMs, status: s.status, detail: s.detail })),
  };
}

export function presentSpendReport(r: SpendReport) {
  return {
    object: 'svc.spend_report' as const,
    by: r.by,
    start_date: r.startDate,
    end_date: r.endDate,
    cells: r.cells.map((c: SpendCell) => ({ date: c.date, value: c.value, ...figures(c) })),
    values: r.values.map((v) => ({ value: v.value, ...figures(v) })),
    other_values: r.otherValues,
    totals: figures(r.totals),
  };
}

const Figures = {
  requests: Type.Integer({ description: 'Requests.' }),
  prompt_tokens: Type.Integer({ description: 'Prompt tokens.' }),
  completion_tokens: Type.Integer({ description: 'Completion tokens.' }),
  cost_usd: Type.Number({ description: 'Cost in USD.' }),
};

const Ms = (description: string) => Num(`${description} (ms from the request's start).`);
const NullableMs = (description: string) => Nullable(Type.Number(), `${description} (ms from the request's start), or null.`);

const RequestTimingsObject = Type.Object(
  {
    authenticated_ms: NullableMs('End of the auth hook: key lookup, request window, scope check; null for background work'),
    validated_ms: Ms('The body read and validated: the inference began (the record\'s created_at)'),
    admitted_ms: NullableMs('Budget check, cache lookup and token reservation passed; null when it stopped before'),
    hops: Type.Array(
      Type.Object({
        route: Str('<provider>/<model>.'),
        model: Str('The model asked of the provider.'),
        start_ms: Ms('When the hop began'),
        duration_ms: Num('How long it took (ms).'),
        outcome: Str('ok, error, timeout, rejected (the provider refused the request), aborted (the client left) or circuit_open (skipped).'),
        error: NullableStr('What failed: http_<status>, or connection, timeout, protocol…; null when ok.'),
      }),
      { description: 'The provider hops in order, fallbacks and circuit-open skips included.' },
    ),
    answered_ms: NullableMs('The answer was complete (a stream\'s last part); null when none came'),
    total_ms: Ms('The outcome handed to the usage writer'),
  },
  { description: "Where the request spent its time, on a monotonic clock from the auth hook's start (for background work, the inference's)." },
);

const RequestDetailObject = Type.Object(
  {
    object: Type.Literal('svc.request_detail'),
    record: UsageRecordObject,
    inference_id: NullableStr('The inf_ id of its retained record (GET /v1/inference/{id}), or null when none was kept.'),
    content_retained: Type.Boolean({ description: 'Whether the retained record still holds the request and answer.' }),
    trace_id: NullableStr(
      "The request's W3C trace id: the gateway's trace (X-Svc-Trace-Id) when tracing exported it, else the caller's traceparent trace id, else null.",
    ),
    timings: Nullable(RequestTimingsObject, 'Where the request spent its time; null on records written before timings were kept.'),
    timeline: Type.Array(
      Type.Object({
        step: Type.String({ description: 'received, authenticated, validated, limits, cache, provider (one per hop), answered or outcome.' }),
        at_ms: Type.Number({ description: 'Unix milliseconds when the step began.' }),
        offset_ms: Type.Number({ description: "Milliseconds from the request's start." }),
        duration_ms: Nullable(Type.Number(), 'How long the step took (ms); null on records written before timings were kept.'),
        status: Type.String({ description: 'ok, failed or skipped.' }),
        detail: Type.String({ description: 'What happened at this step.' }),
      }),
    ),
  },
  { description: "One request of the log: its usage record, its timeline and where its retained content is." },
);

const SpendReportObject = Type.Object(
  {
    object: Type.Literal('svc.spend_report'),
    by: Type.String({ description: 'key, model, customer, route or status.' }),
    start_date: Type.String({ description: 'The first day (UTC), YYYY-MM-DD.' }),
    end_date: Type.String({ description: 'The last day (UTC), YYYY-MM-DD.' }),
    cells: Type.Array(
      Type.Object({ date: Type.String({ description: 'YYYY-MM-DD (UTC).' }), value: NullableStr("The dimension's value; null: the values past top, summed."), ...Figures }),
      { description: 'One per day and value with usage, oldest day first.' },
    ),
    values: Type.Array(Type.Object({ value: NullableStr("The dimension's value; null: the values past top, summed."), ...Figures }), {
      description: 'One per value over the range, costliest first.',
    }),
    other_values: Type.Integer({ description: 'How many values are summed as the one with value null.' }),
    totals: Type.Object(Figures),
  },
  { description: 'Spend per UTC day, split by key, model, customer, route or status.' },
);

/** The console's request log and spend report, the twins of GraphQL requestLog, requestDetail and spend. */
export const requestsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/v1/usage/requests', { config: { action: 'usage.read' }, schema: { querystring: RequestLogQuery, response: { 200: ListOf(UsageRecordObject) } } }, async (req, reply) =>
    sendList(reply, await listRequestLog(app.ports.usage, req.ctx, req.query), '/v1/usage/requests', presentUsageRecord),
  );
  app.get('/v1/usage/requests/:request_id', { config: { action: 'usage.read' }, schema: { params: RequestIdParams, response: { 200: RequestDetailObject } } }, async (req) =>
    presentRequestDetail(await getRequestDetail(app.ports.usage, req.ctx, req.params.request_id)),
  );
  app.get('/v1/usage/spend', { config: { action: 'usage.read' }, schema: { querystring: SpendQuery, response: { 200: SpendReportObject } } }, async (req) =>
    presentSpendReport(await spendReport(app.ports.usage, req.ctx, req.query)),
  );
};
