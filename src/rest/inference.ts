import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { unixSeconds } from '../domain/context.ts';
import { createInference, streamInference, type InferenceInput, type InferenceResult } from '../domain/inference/service.ts';
import { microsToUsd } from '../providers/pricing.ts';
import { errorBody } from '../http/error-body.ts';
import { ticketOf } from '../http/hooks/rate-limit.ts';
import { sendEventStream, setCacheHeader, sse, type StreamFormat } from './event-stream.ts';
import { InferenceResponse } from './inference-response.ts';

/** CONTRACT §8's response. */
export function presentInference(r: InferenceResult) {
  return {
    id: r.id,
    object: 'svc.inference' as const,
    created_at: unixSeconds(r.createdAt),
    model: r.model,
    route: r.route,
    region: r.region,
    cache_hit: r.cacheHit,
    message: { role: 'assistant' as const, content: r.content },
    finish_reason: r.finishReason,
    usage: { prompt_tokens: r.promptTokens, completion_tokens: r.completionTokens, total_tokens: r.promptTokens + r.completionTokens },
    cost_usd: microsToUsd(r.costMicros),
    request_id: r.requestId,
  };
}

const InferenceBody = {
  type: 'object',
  additionalProperties: false,
  required: ['model', 'messages'],
  properties: {
    model: { type: 'string' },
    project_id: { type: ['string', 'null'] },
    // Items are checked by the service, so that errors name `messages[i].role` and GraphQL shares the rules.
    messages: { type: 'array' },
    max_tokens: { type: ['integer', 'null'] },
    temperature: { type: ['number', 'null'] },
    stream: { type: ['boolean', 'null'] },
    cache: { type: ['boolean', 'integer', 'null'] },
    region: { type: ['string', 'null'] },
    metadata: { type: ['object', 'null'] },
  },
} as const;

/** The svc stream: `delta` events, then one `done` event carrying the whole response (usage and cost included). */
function svcFormat(req: FastifyRequest): StreamFormat {
  let id: string | null = null;
  return {
    start: (head) => {
      id = head.id;
      return [];
    },
    event: (e) => {
      if (e.type === 'delta') return [sse({ id, object: 'svc.inference.delta', delta: { content: e.content } }, 'delta')];
      if (e.type === 'done') return [sse(presentInference(e.result), 'done')];
      return [sse(errorBody(req, e.error.code, e.error.message, e.error.param), 'error')];
    },
    end: () => [],
    replay: presentInference,
  };
}

export const inferenceRoutes: FastifyPluginAsync = async (app) => {
  app.post<{ Body: InferenceInput }>('/v1/inference', { schema: { body: InferenceBody, response: { 200: InferenceResponse } } }, async (req, reply) => {
    if (req.body.stream === true) {
      return sendEventStream(req, reply, (signal) => streamInference(app.ports.inference, req.ctx, ticketOf(req), req.body, signal), svcFormat(req));
    }
    const result = await createInference(app.ports.inference, req.ctx, ticketOf(req), req.body);
    setCacheHeader(reply, result.cacheStatus);
    return presentInference(result);
  });
};
