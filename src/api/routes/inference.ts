import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { unixSeconds } from '../../domain/context.ts';
import { InferenceRequest, ProjectQuery } from '../../domain/inference/schema.ts';
import { createInference, streamInference, type InferenceResult } from '../../domain/inference/service.ts';
import { microsToUsd } from '../../kernel/money.ts';
import { errorBody } from '../error-body.ts';
import { ticketOf } from '../hooks/auth.ts';
import { cacheHeaders, sendEventStream, sse, type StreamFormat } from './event-stream.ts';
import { typeboxValidator } from './openai.ts';
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
    // CONTRACT §9: the message may carry the model's tool calls (content stays a string, '' when it only called tools).
    message: r.toolCalls ? { role: 'assistant' as const, content: r.content, tool_calls: r.toolCalls } : { role: 'assistant' as const, content: r.content },
    finish_reason: r.finishReason,
    usage: { prompt_tokens: r.promptTokens, completion_tokens: r.completionTokens, total_tokens: r.promptTokens + r.completionTokens },
    cost_usd: microsToUsd(r.costMicros),
    request_id: r.requestId,
    ...(r.citations ? { citations: r.citations } : {}),
    ...(r.pii ? { pii: r.pii } : {}),
    ...templateFields(r),
  };
}

/** CONTRACT §10/§11: the template used and the structured-output attempts, only when they apply. */
export const templateFields = (r: InferenceResult) => ({
  ...(r.template ? { template_id: r.template.id, template_version: r.template.version } : {}),
  ...(r.attempts !== undefined ? { attempts: r.attempts } : {}),
});

/** The svc stream: `delta` events, then one `done` event carrying the whole response (usage and cost included). */
function svcFormat(req: FastifyRequest): StreamFormat {
  let id: string | null = null;
  return {
    start: (head) => {
      id = head.id;
      return [];
    },
    event: (e) => {
      // n > 1 and logprobs are the OpenAI surface's: the svc stream carries choice 0's text and tool calls.
      if (e.type === 'delta') return e.choice ? [] : [sse({ id, object: 'svc.inference.delta', delta: { content: e.content } }, 'delta')];
      if (e.type === 'logprobs' || (e.type === 'tool_call' && e.choice)) return [];
      if (e.type === 'tool_call') {
        const call =
          e.id !== undefined || e.name !== undefined
            ? { index: e.index, id: e.id, type: 'function', function: { name: e.name, arguments: e.arguments } }
            : { index: e.index, function: { arguments: e.arguments } };
        return [sse({ id, object: 'svc.inference.delta', delta: { tool_calls: [call] } }, 'delta')];
      }
      if (e.type === 'done') return [sse(presentInference(e.result), 'done')];
      return [sse(errorBody(req, e.error.code, e.error.message, e.error.param), 'error')];
    },
    end: () => [],
    replay: presentInference,
  };
}

export const inferenceRoutes: FastifyPluginAsync = async (app) => {
  app.post<{ Body: InferenceRequest }>('/v1/inference', { config: { action: 'inference.create' }, schema: { body: InferenceRequest, querystring: ProjectQuery, response: { 200: InferenceResponse } }, validatorCompiler: typeboxValidator }, async (req, reply) => {
    if (req.body.stream === true) {
      return sendEventStream(req, reply, (signal) => streamInference(app.ports.inference, req.ctx, ticketOf(req), req.body, signal), svcFormat(req));
    }
    const result = await createInference(app.ports.inference, req.ctx, ticketOf(req), req.body);
    reply.headers(cacheHeaders[result.cacheStatus]);
    return presentInference(result);
  });
};
