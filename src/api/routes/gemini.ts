import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import {
  BatchEmbedContentsRequest,
  CountTokensRequest,
  EmbedContentRequest,
  GeminiQuery,
  GenerateContentRequest,
} from '../../domain/inference/protocols/gemini-schema.ts';
import {
  chatRequestOfGemini,
  countGeminiTokens,
  embeddingsRequestOfGemini,
  finalChunk,
  geminiError,
  presentGenerateContent,
  textChunk,
  type GeminiFields,
} from '../../domain/inference/protocols/gemini.ts';
import { createEmbeddings, createInference, streamInference } from '../../domain/inference/service.ts';
import { parseInput } from '../../domain/inference/validate.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import type { ErrorBody } from '../error-body.ts';
import { ticketOf } from '../hooks/auth.ts';
import { cacheHeaders, sendEventStream, sse, type StreamFormat } from './event-stream.ts';
import { OPENAI_SURFACE, typeboxValidator } from './openai.ts';
import { svcOf } from '../../domain/inference/protocols/openai.ts';

/**
 * The Gemini API inbound (CONTRACT §19), as `@google/genai` sends it with `httpOptions.baseUrl` set to the gateway:
 * POST /v1beta/models/{model}:generateContent, :streamGenerateContent?alt=sse, :countTokens, :embedContent and
 * :batchEmbedContents. One wildcard route: a model id may hold "/" (as on the OpenAI routes), so the path is split on its
 * last ":" into the model and the method. The key comes as `x-goog-api-key` or `?key=` (or Bearer); errors keep
 * Google's shape with the svc code in an ErrorInfo detail. The translation is domain/inference/protocols/gemini.ts.
 */

type Query = { alt?: 'sse' | 'json'; key?: string; project_id?: string };

/** Where Google's clients send the key: `x-goog-api-key`, else `?key=`; neither: Authorization as usual. */
export function googleCredential(req: FastifyRequest): string | undefined {
  const header = req.headers['x-goog-api-key'];
  if (typeof header === 'string' && header !== '') return `Bearer ${header}`;
  const key = (req.query as { key?: unknown } | undefined)?.key;
  return typeof key === 'string' && key !== '' ? `Bearer ${key}` : undefined;
}

/** google.rpc.Code names by HTTP status, as Google's APIs answer them. */
const GOOGLE_STATUS: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  402: 'FAILED_PRECONDITION',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  405: 'UNIMPLEMENTED',
  408: 'DEADLINE_EXCEEDED',
  409: 'ABORTED',
  412: 'FAILED_PRECONDITION',
  413: 'INVALID_ARGUMENT',
  415: 'INVALID_ARGUMENT',
  422: 'FAILED_PRECONDITION',
  429: 'RESOURCE_EXHAUSTED',
  499: 'CANCELLED',
  500: 'INTERNAL',
  501: 'UNIMPLEMENTED',
  502: 'UNAVAILABLE',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

/**
 * Google's error shape `{error: {code, message, status, details}}`: the svc code as an ErrorInfo's `reason` (domain
 * `svc`, metadata request_id, doc_url, param), and a BadRequest field violation naming the field when there is one.
 */
export function googleError(body: ErrorBody, status: number) {
  const e = body.error;
  const metadata: Record<string, string> = { request_id: e.request_id, doc_url: e.doc_url };
  if (e.param) metadata.param = e.param;
  if (e.approval_id) metadata.approval_id = e.approval_id;
  const details: Record<string, unknown>[] = [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: e.code, domain: 'svc', metadata }];
  if (e.param) details.push({ '@type': 'type.googleapis.com/google.rpc.BadRequest', fieldViolations: [{ field: e.param, description: e.message }] });
  return { error: { code: status, message: e.message, status: GOOGLE_STATUS[status] ?? (status >= 500 ? 'INTERNAL' : 'UNKNOWN'), details } };
}

/**
 * Gemini's stream: each event a partial GenerateContentResponse; function calls, finishReason and usage in the last.
 * An error after the first token is the shared writer's, in Google's shape, its field renamed to the request's.
 */
function geminiChunks(fields: GeminiFields): StreamFormat {
  let head: { id: string; model: string };
  return {
    start: (h) => {
      head = h;
      return [];
    },
    event: (e) => {
      if (e.type === 'delta') return e.content === '' ? [] : [sse(textChunk(head, e.content, e.choice ?? 0))];
      if (e.type === 'done') return [sse({ ...finalChunk(e.result), svc: svcOf(e.result) })];
      // Gemini sends a function call whole: the calls come with the last chunk, from the finished answer. Logprobs and
      // the other surfaces' events have no place in Gemini's stream.
      return [];
    },
    end: () => [],
    replay: (r) => ({ ...presentGenerateContent(r), svc: svcOf(r) }),
    errors: { rename: (err) => geminiError(err, fields) as SvcError },
  };
}

const METHODS = new Set(['generateContent', 'streamGenerateContent', 'countTokens', 'embedContent', 'batchEmbedContents']);

/** `gemini-2.5-flash:generateContent` (what follows /v1beta/models/) as the model and the method. */
function target(path: string): { model: string; method: string } {
  const at = path.lastIndexOf(':');
  const model = at === -1 ? path : path.slice(0, at);
  const method = at === -1 ? '' : path.slice(at + 1);
  if (!METHODS.has(method)) {
    throw new SvcError('not_found', { message: `No method "${method.slice(0, 100)}" on models/${model.slice(0, 200)}: generateContent, streamGenerateContent, countTokens, embedContent or batchEmbedContents.` });
  }
  if (model === '') throw invalid('model', 'The path names no model: /v1beta/models/{model}:{method}.');
  return { model, method };
}

export const geminiRoutes: FastifyPluginAsync = async (app) => {
  const generate = async (req: FastifyRequest, reply: FastifyReply, model: string, stream: boolean, projectId: string | undefined) => {
    const { request, fields, extras } = chatRequestOfGemini(model, parseInput(GenerateContentRequest, req.body));
    if (projectId !== undefined) request.project_id = projectId;
    const surface = extras ? { ...OPENAI_SURFACE, anthropic: extras } : OPENAI_SURFACE;
    const renamed = (err: unknown) => {
      throw geminiError(err, fields);
    };
    if (stream) {
      if ((req.query as Query).alt !== 'sse') throw invalid('alt', 'streamGenerateContent is served as server-sent events: add ?alt=sse.');
      return sendEventStream(
        req,
        reply,
        (signal) => streamInference(app.ports.inference, req.ctx, ticketOf(req), request, signal, surface).catch(renamed),
        geminiChunks(fields),
      );
    }
    const result = await createInference(app.ports.inference, req.ctx, ticketOf(req), request, surface).catch(renamed);
    reply.headers(cacheHeaders[result.cacheStatus]);
    return { ...presentGenerateContent(result), svc: svcOf(result) };
  };

  app.post<{ Params: { '*': string }; Querystring: Query }>('/v1beta/models/*',
    {
      config: { action: 'inference.create', credential: googleCredential, errorShape: googleError },
      // The body's schema depends on the method (checked in the handler): any JSON here.
      schema: { querystring: GeminiQuery, body: Type.Unknown() },
      validatorCompiler: typeboxValidator,
    },
    async (req, reply) => {
      const { model, method } = target(req.params['*']);
      const projectId = req.query.project_id;
      switch (method) {
        case 'generateContent':
          return generate(req, reply, model, false, projectId);
        case 'streamGenerateContent':
          return generate(req, reply, model, true, projectId);
        case 'countTokens': {
          // Counted by the gateway, no provider asked: one request from the window, no tokens, no usage record.
          await ticketOf(req).takeDeferred();
          return { totalTokens: await countGeminiTokens(app.ports.inference, req.ctx, model, parseInput(CountTokensRequest, req.body)) };
        }
        default: {
          const batch = method === 'batchEmbedContents';
          const body = batch ? parseInput(BatchEmbedContentsRequest, req.body) : parseInput(EmbedContentRequest, req.body);
          const input = embeddingsRequestOfGemini(model, body);
          if (projectId !== undefined) input.project_id = projectId;
          const { result, vectors } = await createEmbeddings(app.ports.inference, req.ctx, ticketOf(req), input);
          const svc = svcOf(result);
          return batch ? { embeddings: vectors.map((values) => ({ values })), svc } : { embedding: { values: vectors[0]! }, svc };
        }
      }
    },
  );
};
