import { Type } from 'typebox';
import { Citation, Pii, ToolCall } from './openai-responses.ts';
import { Bool, Int, Num, Str, TokenUsage, Unix } from '../response-fields.ts';

/**
 * CONTRACT §8's response (presentInference), as the route's 200 response schema: fastify then serializes the answer
 * with fast-json-stringify (compiled once) instead of JSON.stringify walking the object on every inference.
 * Serialization only: a field missing here is left out of the answer, so a field added to presentInference must be
 * added here too (test/inference/inference.rest.test.ts compares whole bodies). Fields present only sometimes come
 * last, as fast-json-stringify writes optional properties after the required ones.
 */
export const InferenceResponse = Type.Object(
  {
    id: Str('The inference id (inf_…).'),
    object: Type.Literal('svc.inference', { description: 'Always "svc.inference".' }),
    created_at: Unix('Created'),
    model: Str('The model that answered.'),
    route: Str('The route (provider and model) that served it.'),
    region: Str("The provider's region."),
    cache_hit: Bool('Whether it was answered from the response cache.'),
    message: Type.Object(
      {
        role: Type.Literal('assistant', { description: 'Always "assistant".' }),
        content: Str("The answer ('' when the model only called tools)."),
        // CONTRACT §9: the model's tool calls, when it called tools.
        tool_calls: Type.Optional(Type.Array(ToolCall, { description: 'The tool calls, when the model called tools.' })),
      },
      { description: "The model's message." },
    ),
    finish_reason: Str('stop, length, tool_calls or content_filter.'),
    usage: TokenUsage,
    cost_usd: Num('What it cost, in USD.'),
    request_id: Str('The request id (X-Svc-Request-Id).'),
    // CONTRACT §13: the rag option's sources.
    citations: Type.Optional(Type.Array(Citation, { description: "The rag option's sources, when asked for." })),
    // CONTRACT §11: what PII redaction replaced, by kind.
    pii: Type.Optional(Pii),
    // CONTRACT §10/§11: present only when a template was used / a JSON response_format was asked for.
    template_id: Type.Optional(Str('The prompt template used.')),
    template_version: Type.Optional(Int('Its version.')),
    attempts: Type.Optional(Int('With a JSON response_format: how many answers it took.')),
  },
  { description: "CONTRACT §8's inference response." },
);
