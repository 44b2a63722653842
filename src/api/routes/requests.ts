import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { PathId } from '../../domain/schema.ts';
import { getRequestDetail, listRequestLog, RequestLogQuery, type RequestDetail } from '../../domain/usage/requests.ts';
import { spendReport, SpendQuery, type SpendCell, type SpendFigures, type SpendReport } from '../../domain/usage/spend.ts';
import { microsToUsd } from '../../kernel/money.ts';
import { ListOf, sendList } from '../list.ts';
import { NullableStr } from '../response-fields.ts';
import { presentUsageRecord, UsageRecordObject } from './usage.ts';

const RequestIdParams = PathId('request_id', 'The request id (req_…) of a usage record.');

const figures = (f: SpendFigures) => ({
  requests: f.requests,
  prompt_tokens: f.promptTokens,
  completion_tokens: f.completionTokens,
  cost_usd: microsToUsd(f.costMicros),
});

export function presentRequestDetail(d: RequestDetail) {
  return {
    object: 'svc.request_detail' as const,
    record: presentUsageRecord(d.record),
    inference_id: d.inferenceId,
    content_retained: d.contentRetained,
    timeline: d.timeline.map((s) => ({ step: s.step, at_ms: s.atMs, status: s.status, detail: s.detail })),
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

const RequestDetailObject = Type.Object(
  {
    object: Type.Literal('svc.request_detail'),
    record: UsageRecordObject,
    inference_id: NullableStr('The inf_ id of its retained record (GET /v1/inference/{id}), or null when none was kept.'),
    content_retained: Type.Boolean({ description: 'Whether the retained record still holds the request and answer.' }),
    timeline: Type.Array(
      Type.Object({
        step: Type.String({ description: 'received, authenticated, limits, cache, provider or outcome.' }),
        at_ms: Type.Number({ description: 'Unix milliseconds.' }),
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
