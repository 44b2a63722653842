import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { unixSeconds } from '../../domain/context.ts';
import { getModel, listModels, type ModelInfo } from '../../domain/inference/models.ts';
import type { TSchema } from 'typebox';
import { ChatCompletionRequest, ProjectQuery } from '../../domain/inference/schema.ts';
import { validatorOf } from '../../domain/inference/validate.ts';
import { createInference, streamInference } from '../../domain/inference/service.ts';
import { ticketOf } from '../hooks/auth.ts';
import { cacheHeaders, sendEventStream, sse, type StreamFormat } from './event-stream.ts';
import { ChatCompletion, Model, ModelList } from './openai-responses.ts';
import { presentChatCompletion, svcOf, usageOf } from '../../domain/inference/protocols/openai.ts';

/**
 * OpenAI compatibility beyond the spec: /v1/chat/completions and /v1/models in OpenAI's shapes, over the same pipeline
 * as /v1/inference (limits, budget, routing, cache, usage, events), so an OpenAI SDK works by changing its base URL and
 * key. Errors keep the svc error object, which carries OpenAI's fields (message, type, code, param).
 */

/** The OpenAI surface addresses the key's own project unless the caller names one. */
export const OPENAI_SURFACE = { projectFromKey: true } as const;

/** The inference routes check their bodies with their TypeBox schema (domain/inference/schema.ts), errors naming the field. */
export const typeboxValidator = ({ schema }: { schema: unknown }) => validatorOf(schema as TSchema);

/** OpenAI's stream: chat.completion.chunk events, a usage chunk when stream_options.include_usage, then [DONE]. */
function chunkFormat(req: FastifyRequest, includeUsage: boolean): StreamFormat {
  let base: { id: string; object: 'chat.completion.chunk'; created: number; model: string; system_fingerprint: null } | null = null;
  // With include_usage, every chunk but the last has `usage: null` (OpenAI's documented shape).
  const chunk = (delta: Record<string, unknown>, finish: string | null, index = 0, logprobs: unknown = null) => ({
    ...base!,
    choices: [{ index, delta, logprobs, finish_reason: finish }],
    ...(includeUsage ? { usage: null } : {}),
  });
  return {
    start: (head) => {
      base = { id: head.id, object: 'chat.completion.chunk', created: unixSeconds(head.createdAt), model: head.model, system_fingerprint: null };
      return [sse(chunk({ role: 'assistant', content: '' }, null))];
    },
    event: (e) => {
      if (e.type === 'delta') return [sse(chunk({ content: e.content }, null, e.choice))];
      if (e.type === 'tool_call') {
        // OpenAI's indexed deltas: the first piece of a call has its id, type and name; later ones more arguments.
        const call =
          e.id !== undefined || e.name !== undefined
            ? { index: e.index, id: e.id, type: 'function', function: { name: e.name, arguments: e.arguments } }
            : { index: e.index, function: { arguments: e.arguments } };
        return [sse(chunk({ tool_calls: [call] }, null, e.choice))];
      }
      if (e.type === 'logprobs') return [sse(chunk({}, null, e.choice, e.logprobs))];
      if (e.type === 'done') {
        const finishes = e.result.choices ?? [{ index: 0, finishReason: e.result.finishReason }];
        const out = finishes.map((c) => sse(chunk({}, c.finishReason, c.index)));
        if (includeUsage) out.push(sse({ ...base!, choices: [], usage: usageOf(e.result), svc: svcOf(e.result) }));
        return out;
      }
      return [];
    },
    end: () => ['data: [DONE]\n\n'],
    replay: presentChatCompletion,
    // An error after the first token: the shared writer's, the spec's error object without [DONE] after it.
    errors: {},
  };
}

function presentModel(m: ModelInfo, created: number) {
  return {
    id: m.id,
    object: 'model' as const,
    created,
    owned_by: m.routes[0]!.provider.name,
    svc: {
      // CONTRACT §9: chat (the chat routes and /v1/responses) or embedding (/v1/embeddings).
      type: m.routes[0]!.model.type,
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

  app.post<{ Body: ChatCompletionRequest }>('/v1/chat/completions',
    { config: { action: 'inference.create' }, schema: { body: ChatCompletionRequest, querystring: ProjectQuery, response: { 200: ChatCompletion } }, validatorCompiler: typeboxValidator },
    async (req, reply) => {
      const input = req.body;
      if (input.stream === true) {
        const includeUsage = input.stream_options?.include_usage === true;
        return sendEventStream(
          req,
          reply,
          (signal) => streamInference(app.ports.inference, req.ctx, ticketOf(req), input, signal, OPENAI_SURFACE),
          chunkFormat(req, includeUsage),
        );
      }
      const result = await createInference(app.ports.inference, req.ctx, ticketOf(req), input, OPENAI_SURFACE);
      reply.headers(cacheHeaders[result.cacheStatus]);
      return presentChatCompletion(result);
    },
  );

  // One page: the model list is the providers file's, small and bounded.
  app.get<{ Querystring: { project_id?: string } }>('/v1/models',
    { config: { action: 'model.list' }, schema: { querystring: { type: 'object', additionalProperties: false, properties: { project_id: { type: 'string' } } }, response: { 200: ModelList } } },
    async (req, reply) => {
      const models = await listModels(app.ports.inference.providers, req.ctx, req.query.project_id);
      reply.header('X-Svc-Page-Limit', String(Math.max(models.length, 1)));
      reply.header('X-Svc-Has-More', 'false');
      return { object: 'list' as const, data: models.map((m) => presentModel(m, startedAt)), has_more: false, url: '/v1/models' };
    },
  );

  // Model ids may contain "/" (e.g. meta-llama/Llama-3.1-8B), hence the wildcard.
  app.get<{ Params: { '*': string } }>('/v1/models/*', { config: { action: 'model.read' }, schema: { response: { 200: Model } } }, async (req) => presentModel(await getModel(app.ports.inference.providers, req.ctx, req.params['*']), startedAt));
};
