import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { UsageRecord } from '../generated/prisma/client.ts';
import { unixSeconds } from '../domain/context.ts';
import { listUsage, MAX_DAYS, type UsageDay } from '../domain/usage/service.ts';
import { UsageQuery } from '../domain/usage/schema.ts';
import { microsToUsd } from '../kernel/money.ts';
import { sendList } from './list.ts';

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

export const usageRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/v1/usage', { schema: { querystring: UsageQuery } }, async (req, reply) => {
    const usage = await listUsage(app.ports.usage, req.ctx, req.query);
    if (usage.granularity === 'request') return sendList(reply, usage.page, '/v1/usage', presentUsageRecord);
    return sendList(reply, { data: usage.days, hasMore: false, limit: MAX_DAYS }, '/v1/usage', presentUsageDay);
  });
};
