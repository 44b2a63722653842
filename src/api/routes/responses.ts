import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { chatRequestOfResponse } from '../../domain/inference/responses.ts';
import { priorConversation } from '../../domain/privacy/responses.ts';
import { EmbeddingsRequest, ProjectQuery, ResponsesRequest } from '../../domain/inference/schema.ts';
import { createEmbeddings, createInference, streamInference } from '../../domain/inference/service.ts';
import { ticketOf } from '../hooks/auth.ts';
import { cacheHeaders, sendEventStream, sse, type StreamFormat } from './event-stream.ts';
import { OPENAI_SURFACE, typeboxValidator } from './openai.ts';
import { callItemId, messageId, outputText, presentResponse, statusOf, type Head } from '../../domain/inference/protocols/responses.ts';
import { svcOf } from '../../domain/inference/protocols/openai.ts';
import { Embeddings, ResponseObject } from './openai-responses.ts';

/**
 * POST /v1/responses (OpenAI's Responses API, the stateless subset of CONTRACT §9) and POST /v1/embeddings, in
 * OpenAI's shapes, over the same inference pipeline as /v1/chat/completions. The response's `id` is the inference's
 * `inf_` id (what GET /v1/inference/{id} will read, CONTRACT §12).
 */

/**
 * The Responses API's stream, as the openai SDK and the Vercel AI SDK read it: response.created and .in_progress;
 * per output item output_item.added, its content (content_part.added, output_text.delta…, output_text.done,
 * content_part.done; or function_call_arguments.delta…, .done) and output_item.done; then response.completed (or
 * .incomplete). Every event has `type` and `sequence_number`; no [DONE].
 */
function responseEvents(req: FastifyRequest, body: ResponsesRequest): StreamFormat {
  let head: Head;
  let seq = 0;
  let next = 0;
  let message: { index: number; text: string; closed: boolean } | null = null;
  const calls = new Map<number, { index: number; id: string; callId: string; name: string; args: string; closed: boolean }>();
  let lastCall: number | null = null;
  const ev = (type: string, data: Record<string, unknown>) => sse({ type, sequence_number: seq++, ...data }, type);

  const openMessage = (): string[] => {
    message = { index: next++, text: '', closed: false };
    const id = messageId(head.id);
    return [
      ev('response.output_item.added', { output_index: message.index, item: { type: 'message', id, status: 'in_progress', role: 'assistant', content: [] } }),
      ev('response.content_part.added', { item_id: id, output_index: message.index, content_index: 0, part: outputText('') }),
    ];
  };
  const closeMessage = (): string[] => {
    if (!message || message.closed) return [];
    message.closed = true;
    const id = messageId(head.id);
    const part = outputText(message.text);
    return [
      ev('response.output_text.done', { item_id: id, output_index: message.index, content_index: 0, text: message.text, logprobs: [] }),
      ev('response.content_part.done', { item_id: id, output_index: message.index, content_index: 0, part }),
      ev('response.output_item.done', {
        output_index: message.index,
        item: { type: 'message', id, status: 'completed', role: 'assistant', content: [part] },
      }),
    ];
  };
  const closeCall = (key: number | null): string[] => {
    const c = key === null ? undefined : calls.get(key);
    if (!c || c.closed) return [];
    c.closed = true;
    return [
      ev('response.function_call_arguments.done', { item_id: c.id, output_index: c.index, arguments: c.args }),
      ev('response.output_item.done', {
        output_index: c.index,
        item: { type: 'function_call', id: c.id, call_id: c.callId, name: c.name, arguments: c.args, status: 'completed' },
      }),
    ];
  };

  return {
    start: (h) => {
      head = h;
      const response = presentResponse(body, h, null);
      return [ev('response.created', { response }), ev('response.in_progress', { response })];
    },
    event: (e) => {
      if (e.type === 'delta') {
        if (e.choice || e.content === '') return [];
        const out = message ? [] : openMessage();
        message!.text += e.content;
        out.push(ev('response.output_text.delta', { item_id: messageId(head.id), output_index: message!.index, content_index: 0, delta: e.content, logprobs: [] }));
        return out;
      }
      if (e.type === 'tool_call') {
        if (e.choice) return [];
        const out = closeMessage();
        let c = calls.get(e.index);
        if (!c) {
          out.push(...closeCall(lastCall));
          const callId = e.id ?? `call_${head.id}_${e.index}`;
          c = { index: next++, id: callItemId(callId), callId, name: e.name ?? '', args: '', closed: false };
          calls.set(e.index, c);
          lastCall = e.index;
          out.push(
            ev('response.output_item.added', {
              output_index: c.index,
              item: { type: 'function_call', id: c.id, call_id: c.callId, name: c.name, arguments: '', status: 'in_progress' },
            }),
          );
        }
        if (e.arguments !== '') {
          c.args += e.arguments;
          out.push(ev('response.function_call_arguments.delta', { item_id: c.id, output_index: c.index, delta: e.arguments }));
        }
        return out;
      }
      if (e.type === 'logprobs') return [];
      if (e.type === 'done') {
        // An answer with neither text nor calls is still one (empty) message, as in the non-streamed response.
        const out = !message && calls.size === 0 ? openMessage() : [];
        out.push(...closeMessage());
        for (const key of calls.keys()) out.push(...closeCall(key));
        const status = statusOf(e.result);
        out.push(ev(status === 'completed' ? 'response.completed' : 'response.incomplete', { response: presentResponse(body, head, e.result) }));
        return out;
      }
      const error = { code: e.error.code, message: e.error.message };
      return [
        ev('error', { ...error, param: e.error.param }),
        ev('response.failed', { response: { ...presentResponse(body, head, null, 'failed'), error, request_id: req.id } }),
      ];
    },
    end: () => [],
    replay: (result) => presentResponse(body, result, result),
  };
}

const float32Base64 = (v: number[]) => Buffer.from(new Float32Array(v).buffer).toString('base64');

export const responsesRoutes: FastifyPluginAsync = async (app) => {
  app.post<{ Body: ResponsesRequest }>('/v1/responses',
    { config: { action: 'inference.create' }, schema: { body: ResponsesRequest, querystring: ProjectQuery, response: { 200: ResponseObject } }, validatorCompiler: typeboxValidator },
    async (req, reply) => {
      const input = chatRequestOfResponse(req.body, await priorConversation({ ...app.ports.privacy, projectReader: app.ports.inference.projects }, req.ctx, req.body));
      if (req.body.stream === true) {
        return sendEventStream(
          req,
          reply,
          (signal) => streamInference(app.ports.inference, req.ctx, ticketOf(req), input, signal, OPENAI_SURFACE),
          responseEvents(req, req.body),
        );
      }
      const result = await createInference(app.ports.inference, req.ctx, ticketOf(req), input, OPENAI_SURFACE);
      reply.headers(cacheHeaders[result.cacheStatus]);
      return presentResponse(req.body, result, result);
    },
  );

  app.post<{ Body: EmbeddingsRequest }>('/v1/embeddings',
    { config: { action: 'inference.create' }, schema: { body: EmbeddingsRequest, querystring: ProjectQuery, response: { 200: Embeddings } }, validatorCompiler: typeboxValidator },
    async (req) => {
      const { result, vectors } = await createEmbeddings(app.ports.inference, req.ctx, ticketOf(req), req.body);
      const base64 = req.body.encoding_format === 'base64';
      return {
        object: 'list' as const,
        data: vectors.map((v, index) => ({ object: 'embedding' as const, index, embedding: base64 ? float32Base64(v) : v })),
        model: result.model,
        usage: { prompt_tokens: result.promptTokens, total_tokens: result.promptTokens },
        svc: svcOf(result),
      };
    },
  );
};
