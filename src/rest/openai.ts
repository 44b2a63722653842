import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { unixSeconds } from '../domain/context.ts';
import { getModel, listModels, type ModelInfo } from '../domain/inference/models.ts';
import { assertMaxTokens, createInference, streamInference, type InferenceInput, type InferenceResult } from '../domain/inference/service.ts';
import { invalid } from '../errors/svc-error.ts';
import { errorBody } from '../http/error-body.ts';
import { ticketOf } from '../http/hooks/rate-limit.ts';
import { microsToUsd } from '../providers/pricing.ts';
import { sendEventStream, setCacheHeader, sse, type StreamFormat } from './event-stream.ts';

/**
 * OpenAI compatibility beyond the spec: /v1/chat/completions and /v1/models in OpenAI's shapes, over the same pipeline
 * as /v1/inference (limits, budget, routing, cache, usage, events), so an OpenAI SDK works by changing its base URL and
 * key. Errors keep the svc error object, which carries OpenAI's fields (message, type, code, param).
 */

interface ChatBody {
  model: string;
  messages: unknown[];
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  n?: number | null;
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean | null } | null;
  stop?: string | string[] | null;
  seed?: number | null;
  presence_penalty?: number | null;
  frequency_penalty?: number | null;
  user?: string | null;
  // svc extensions
  project_id?: string | null;
  cache?: boolean | number | null;
  region?: string | null;
  metadata?: Record<string, unknown> | null;
}

const ChatBodySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['model', 'messages'],
  properties: {
    model: { type: 'string' },
    messages: { type: 'array' },
    max_tokens: { type: ['integer', 'null'] },
    max_completion_tokens: { type: ['integer', 'null'] },
    temperature: { type: ['number', 'null'] },
    top_p: { type: ['number', 'null'] },
    n: { type: ['integer', 'null'] },
    stream: { type: ['boolean', 'null'] },
    stream_options: {
      type: ['object', 'null'],
      additionalProperties: false,
      properties: { include_usage: { type: ['boolean', 'null'] } },
    },
    stop: { type: ['string', 'array', 'null'] },
    seed: { type: ['integer', 'null'] },
    presence_penalty: { type: ['number', 'null'] },
    frequency_penalty: { type: ['number', 'null'] },
    user: { type: ['string', 'null'] },
    project_id: { type: ['string', 'null'] },
    cache: { type: ['boolean', 'integer', 'null'] },
    region: { type: ['string', 'null'] },
    metadata: { type: ['object', 'null'] },
  },
} as const;

/** OpenAI messages to svc messages: text parts joined, `developer` read as `system`, `name` dropped. */
function toSvcMessages(messages: unknown[]): unknown[] {
  return messages.map((m, i) => {
    if (typeof m !== 'object' || m === null || Array.isArray(m)) return m;
    const { name: _name, ...msg } = m as Record<string, unknown>;
    if (msg.role === 'developer') msg.role = 'system';
    if (Array.isArray(msg.content)) {
      msg.content = msg.content
        .map((part, j) => {
          const p = part as { type?: unknown; text?: unknown } | null;
          if (!p || p.type !== 'text' || typeof p.text !== 'string') {
            throw invalid(`messages[${i}].content[${j}]`, 'Only text content parts are supported.');
          }
          return p.text;
        })
        .join('');
    }
    return msg;
  });
}

function toInferenceInput(req: FastifyRequest<{ Body: ChatBody }>): InferenceInput {
  const b = req.body;
  if (b.n !== undefined && b.n !== null && b.n !== 1) throw invalid('n', 'Only n = 1 is supported.');
  assertMaxTokens(b.max_completion_tokens, 'max_completion_tokens');
  if (b.stream_options != null && b.stream !== true) {
    throw invalid('stream_options', 'stream_options is only allowed when stream is true.');
  }
  return {
    model: b.model,
    // The key's own project unless the caller names one (the operator must: body project_id or X-Svc-Project).
    project_id: b.project_id ?? req.ctx.caller.projectId,
    messages: toSvcMessages(b.messages),
    max_tokens: b.max_completion_tokens ?? b.max_tokens,
    temperature: b.temperature ?? undefined,
    top_p: b.top_p ?? undefined,
    stop: b.stop ?? undefined,
    seed: b.seed ?? undefined,
    presence_penalty: b.presence_penalty ?? undefined,
    frequency_penalty: b.frequency_penalty ?? undefined,
    cache: b.cache,
    region: b.region,
    metadata: b.metadata,
  };
}

const usageOf = (r: InferenceResult) => ({
  prompt_tokens: r.promptTokens,
  completion_tokens: r.completionTokens,
  total_tokens: r.promptTokens + r.completionTokens,
});

/** Where the gateway sent it and what it cost, beside OpenAI's fields. */
const svcOf = (r: InferenceResult) => ({
  route: r.route,
  region: r.region,
  cache_hit: r.cacheHit,
  cost_usd: microsToUsd(r.costMicros),
  request_id: r.requestId,
});

export function presentChatCompletion(r: InferenceResult) {
  return {
    id: r.id,
    object: 'chat.completion' as const,
    created: unixSeconds(r.createdAt),
    model: r.model,
    choices: [
      { index: 0, message: { role: 'assistant' as const, content: r.content, refusal: null }, logprobs: null, finish_reason: r.finishReason },
    ],
    usage: usageOf(r),
    system_fingerprint: null,
    svc: svcOf(r),
  };
}

/** OpenAI's stream: chat.completion.chunk events, a usage chunk when stream_options.include_usage, then [DONE]. */
function chunkFormat(req: FastifyRequest, includeUsage: boolean): StreamFormat {
  let base: { id: string; object: 'chat.completion.chunk'; created: number; model: string; system_fingerprint: null } | null = null;
  let failed = false;
  // With include_usage, every chunk but the last has `usage: null` (OpenAI's documented shape).
  const chunk = (delta: Record<string, unknown>, finish: string | null) => ({
    ...base!,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    ...(includeUsage ? { usage: null } : {}),
  });
  return {
    start: (head) => {
      base = { id: head.id, object: 'chat.completion.chunk', created: unixSeconds(head.createdAt), model: head.model, system_fingerprint: null };
      return [sse(chunk({ role: 'assistant', content: '' }, null))];
    },
    event: (e) => {
      if (e.type === 'delta') return [sse(chunk({ content: e.content }, null))];
      if (e.type === 'done') {
        const out = [sse(chunk({}, e.result.finishReason))];
        if (includeUsage) out.push(sse({ ...base!, choices: [], usage: usageOf(e.result), svc: svcOf(e.result) }));
        return out;
      }
      failed = true;
      return [sse(errorBody(req, e.error.code, e.error.message, e.error.param))];
    },
    end: () => (failed ? [] : ['data: [DONE]\n\n']),
    replay: presentChatCompletion,
  };
}

function presentModel(m: ModelInfo, created: number) {
  return {
    id: m.id,
    object: 'model' as const,
    created,
    owned_by: m.routes[0]!.provider.name,
    svc: {
      routes: m.routes.map((r) => ({
        route: r.id,
        provider: r.provider.name,
        region: r.provider.region,
        input_per_mtok: r.model.inputPerMtok,
        output_per_mtok: r.model.outputPerMtok,
      })),
    },
  };
}

export const openaiRoutes: FastifyPluginAsync = async (app) => {
  const startedAt = unixSeconds(new Date(app.deps.clock.now()));

  app.post<{ Body: ChatBody }>('/v1/chat/completions', { schema: { body: ChatBodySchema } }, async (req, reply) => {
    const input = toInferenceInput(req);
    if (req.body.stream === true) {
      const includeUsage = req.body.stream_options?.include_usage === true;
      return sendEventStream(req, reply, (signal) => streamInference(app.ports.inference, req.ctx, ticketOf(req), input, signal), chunkFormat(req, includeUsage));
    }
    const result = await createInference(app.ports.inference, req.ctx, ticketOf(req), input);
    setCacheHeader(reply, result.cacheStatus);
    return presentChatCompletion(result);
  });

  // One page: the model list is the providers file's, small and bounded.
  app.get<{ Querystring: { project_id?: string } }>(
    '/v1/models',
    { schema: { querystring: { type: 'object', additionalProperties: false, properties: { project_id: { type: 'string' } } } } },
    async (req, reply) => {
      const models = await listModels(app.ports.inference.providers, req.ctx, req.query.project_id);
      reply.header('X-Svc-Page-Limit', String(Math.max(models.length, 1)));
      reply.header('X-Svc-Has-More', 'false');
      return { object: 'list' as const, data: models.map((m) => presentModel(m, startedAt)), has_more: false, url: '/v1/models' };
    },
  );

  // Model ids may contain "/" (e.g. meta-llama/Llama-3.1-8B), hence the wildcard.
  app.get<{ Params: { '*': string } }>('/v1/models/*', async (req) => presentModel(await getModel(app.ports.inference.providers, req.ctx, req.params['*']), startedAt));
};
