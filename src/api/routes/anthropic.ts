import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { chatRequestOfMessages, inAnthropicNames } from '../../domain/inference/protocols/anthropic.ts';
import {
  anthropicErrorType,
  countInputTokens,
  estimatedInputTokens,
  MessageEvents,
  presentMessage,
  type AnthropicEvent,
} from '../../domain/inference/protocols/anthropic-answer.ts';
import { CountTokensRequest, MessagesRequest } from '../../domain/inference/protocols/anthropic-schema.ts';
import { Type } from 'typebox';
import { createInference, streamInference, validateInference, type StreamEvent, type ThinkingEvent } from '../../domain/inference/service.ts';
import { invalid } from '../../errors/svc-error.ts';
import type { ErrorBody } from '../error-body.ts';
import { ticketOf } from '../hooks/auth.ts';
import { cacheHeaders, sendEventStream, sse, type StreamFormat } from './event-stream.ts';
import { typeboxValidator } from './openai.ts';
import { CountTokensResponse, MessageResponse } from './anthropic-responses.ts';

/**
 * The Anthropic Messages API (CONTRACT §19): POST /v1/messages and /v1/messages/count_tokens as the official SDKs and
 * Claude Code send them (ANTHROPIC_BASE_URL set to the gateway), over the same inference pipeline as
 * /v1/chat/completions. The translation both ways is domain/inference/protocols/anthropic*.ts (schema, request, answer); this file is the edge:
 * the key from `x-api-key` (or `Authorization: Bearer`), `anthropic-version` and `anthropic-beta`, Anthropic's error
 * shape with the svc code inside, its `request-id` header, and its event stream.
 */

/** Anthropic's SDKs send the key as x-api-key (ANTHROPIC_API_KEY), Claude Code's ANTHROPIC_AUTH_TOKEN as Bearer. */
function credential(req: FastifyRequest): string | undefined {
  const key = req.headers['x-api-key'];
  return typeof key === 'string' && key !== '' ? `Bearer ${key}` : undefined;
}

/** `{type: "error", error: {type, message}}`, the svc code (and the field, when one is named) inside. */
export function anthropicError(body: ErrorBody, status: number) {
  const e = body.error;
  return {
    type: 'error' as const,
    error: { type: anthropicErrorType(e.code, status), message: e.message, svc_code: e.code, ...(e.param !== null ? { param: e.param } : {}) },
    request_id: e.request_id,
  };
}

/** The query: the operator's project_id, and the `?beta=true` Anthropic's SDK adds for its beta methods (Claude Code's). */
const MessagesQuery = Type.Object({ project_id: Type.Optional(Type.String()), beta: Type.Optional(Type.String()) }, { additionalProperties: false });

const config = { action: 'inference.create', credential, errorShape: anthropicError } as const;

/** The versions Anthropic has dated (2023-06-01 and later); absent is taken as the SDKs' current one. */
function checkVersion(req: FastifyRequest): void {
  const v = req.headers['anthropic-version'];
  if (v === undefined) return;
  if (typeof v !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(v) || v < '2023-06-01') {
    throw invalid('anthropic-version', `anthropic-version must be a dated version from 2023-06-01 on, got ${JSON.stringify(String(v).slice(0, 40))}.`);
  }
}

/** anthropic-beta, passed on to the anthropic kind as given (several headers joined with commas). */
function betaOf(req: FastifyRequest): string | undefined {
  const b = req.headers['anthropic-beta'];
  const value = Array.isArray(b) ? b.join(',') : b;
  return value && value.trim() !== '' ? value : undefined;
}

/** Anthropic's event sequence (MessageEvents); an error after the first token is the shared writer's `error` event. */
function eventStream(events: MessageEvents): StreamFormat {
  const write = (list: AnthropicEvent[]) => list.map((e) => sse(e.data, e.event));
  return {
    start: (head) => write(events.start(head)),
    // ThinkingEvents come among this surface's events only (domain/inference/types.ts).
    event: (e) => write(events.event(e as StreamEvent | ThinkingEvent)),
    end: () => [],
    replay: presentMessage,
    errors: { event: 'error' },
  };
}

export const anthropicRoutes: FastifyPluginAsync = async (app) => {
  // Anthropic's clients read `request-id`; X-Svc-Request-Id is set for every route. Errors included (this plugin only).
  app.addHook('onSend', (req, reply, payload, done) => {
    reply.header('request-id', req.id);
    done(null, payload);
  });

  app.post<{ Body: MessagesRequest }>(
    '/v1/messages',
    { config, schema: { body: MessagesRequest, querystring: MessagesQuery, response: { 200: MessageResponse } }, validatorCompiler: typeboxValidator },
    async (req, reply) => {
      checkVersion(req);
      const { request, messages, extras, origins } = chatRequestOfMessages(req.body, betaOf(req));
      const surface = { projectFromKey: true, anthropic: extras };
      try {
        if (request.stream === true) {
          const events = new MessageEvents(estimatedInputTokens(messages, 0));
          return await sendEventStream(
            req,
            reply,
            (signal) => streamInference(app.ports.inference, req.ctx, ticketOf(req), request, signal, surface),
            eventStream(events),
          );
        }
        const result = await createInference(app.ports.inference, req.ctx, ticketOf(req), request, surface);
        reply.headers(cacheHeaders[result.cacheStatus]);
        return presentMessage(result);
      } catch (err) {
        throw inAnthropicNames(err, origins);
      }
    },
  );

  app.post<{ Body: CountTokensRequest }>(
    '/v1/messages/count_tokens',
    { config, schema: { body: CountTokensRequest, querystring: MessagesQuery, response: { 200: CountTokensResponse } }, validatorCompiler: typeboxValidator },
    async (req) => {
      checkVersion(req);
      const { request, origins } = chatRequestOfMessages(req.body);
      try {
        const v = validateInference(app.ports.inference, req.ctx, request);
        return { input_tokens: await countInputTokens(v.messages, v.extraTokens) };
      } catch (err) {
        throw inAnthropicNames(err, origins);
      }
    },
  );
};
