import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { UsageRecord } from '../../generated/prisma/client.ts';
import { unixSeconds } from '../../domain/context.ts';
import { listUsage, MAX_DAYS, type UsageDay } from '../../domain/usage/service.ts';
import { UsageQuery } from '../../domain/usage/schema.ts';
import { microsToUsd } from '../../kernel/money.ts';
import { Nullable } from '../../domain/schema.ts';
import { ListOf, sendList } from '../list.ts';
import { NullableStr, Unix } from '../response-fields.ts';

/** CONTRACT §8's usage record. */
export function presentUsageRecord(u: UsageRecord) {
  return {
    request_id: u.requestId,
    object: 'svc.usage_record' as const,
    project_id: u.projectId,
    key_id: u.keyId,
    model: u.model,
    route: u.route,
    region: u.region,
    cache_hit: u.cacheHit,
    status: u.status as 'succeeded' | 'failed',
    error_code: u.errorCode,
    prompt_tokens: u.promptTokens,
    completion_tokens: u.completionTokens,
    cost_usd: microsToUsd(u.costMicros),
    latency_ms: u.latencyMs,
    created_at: unixSeconds(u.createdAt),
    // CONTRACT §10: only on the records of templated inferences.
    ...(u.templateId ? { template_id: u.templateId, template_version: u.templateVersion } : {}),
    // CONTRACT §22: only on the records of inferences that named an end customer.
    ...(u.customer !== null ? { customer: u.customer } : {}),
  };
}

export function presentUsageDay(d: UsageDay) {
  return {
    object: 'svc.usage_day' as const,
    date: d.date,
    requests: d.requests,
    prompt_tokens: d.promptTokens,
    completion_tokens: d.completionTokens,
    cost_usd: microsToUsd(d.costMicros),
  };
}

/** presentUsageRecord's answer. */
export const UsageRecordObject = Type.Object(
  {
    request_id: Type.String({ description: 'The request the record accounts for (req_…).' }),
    object: Type.Literal('svc.usage_record'),
    project_id: Type.String({ description: 'The project billed.' }),
    key_id: Type.String({ description: 'The key that made the request.' }),
    model: Type.String({ description: 'The model asked for.' }),
    route: NullableStr('The provider route that answered, or null.'),
    region: NullableStr('The region that answered, or null.'),
    cache_hit: Type.Boolean({ description: 'Whether the answer came from the cache.' }),
    status: Type.String({ description: 'succeeded or failed.' }),
    error_code: NullableStr('The error code of a failed request, or null.'),
    prompt_tokens: Type.Integer({ description: 'Prompt tokens billed.' }),
    completion_tokens: Type.Integer({ description: 'Completion tokens billed.' }),
    cost_usd: Type.Number({ description: 'The cost in USD.' }),
    latency_ms: Type.Integer({ description: 'The request\'s latency in milliseconds.' }),
    created_at: Unix('When the request was made'),
    template_id: Type.Optional(Type.String({ description: 'The template used; only on templated inferences.' })),
    template_version: Type.Optional(Nullable(Type.Integer(), { description: 'The template version used; only on templated inferences.' })),
    customer: Type.Optional(Type.String({ description: 'The end customer the inference named; only when it named one.' })),
  },
  { description: 'One request\'s usage (granularity=request).' },
);

/** presentUsageDay's answer. */
export const UsageDayObject = Type.Object(
  {
    object: Type.Literal('svc.usage_day'),
    date: Type.String({ description: 'The day (UTC), YYYY-MM-DD.' }),
    requests: Type.Integer({ description: 'Requests that day.' }),
    prompt_tokens: Type.Integer({ description: 'Prompt tokens that day.' }),
    completion_tokens: Type.Integer({ description: 'Completion tokens that day.' }),
    cost_usd: Type.Number({ description: 'The cost that day in USD.' }),
  },
  { description: 'One day\'s usage (granularity=day).' },
);

export const usageRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/v1/usage', { config: { action: 'usage.read' }, schema: { querystring: UsageQuery, response: { 200: ListOf(Type.Union([UsageRecordObject, UsageDayObject])) } } }, async (req, reply) => {
    const usage = await listUsage(app.ports.usage, req.ctx, req.query);
    if (usage.granularity === 'request') return sendList(reply, usage.page, '/v1/usage', presentUsageRecord);
    return sendList(reply, { data: usage.days, hasMore: false, limit: MAX_DAYS }, '/v1/usage', presentUsageDay);
  });
};
