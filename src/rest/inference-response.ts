/**
 * The JSON schema of CONTRACT §8's response (presentInference), as the route's 200 response schema: fastify then
 * serializes the answer with fast-json-stringify (compiled once) instead of JSON.stringify walking the object on every
 * inference. Serialization only: a field missing here is left out of the answer, so a field added to
 * presentInference must be added here too (test/inference/inference.rest.test.ts compares whole bodies).
 */
export const InferenceResponse = {
  type: 'object',
  required: ['id', 'object', 'created_at', 'model', 'route', 'region', 'cache_hit', 'message', 'finish_reason', 'usage', 'cost_usd', 'request_id'],
  properties: {
    id: { type: 'string' },
    object: { type: 'string' },
    created_at: { type: 'integer' },
    model: { type: 'string' },
    route: { type: 'string' },
    region: { type: 'string' },
    cache_hit: { type: 'boolean' },
    message: {
      type: 'object',
      required: ['role', 'content'],
      properties: {
        role: { type: 'string' },
        content: { type: 'string' },
        // CONTRACT §9: the model's tool calls, when it called tools.
        tool_calls: {
          type: 'array',
          items: {
            type: 'object',
            required: ['id', 'type', 'function'],
            properties: {
              id: { type: 'string' },
              type: { type: 'string' },
              function: { type: 'object', required: ['name', 'arguments'], properties: { name: { type: 'string' }, arguments: { type: 'string' } } },
            },
          },
        },
      },
    },
    finish_reason: { type: 'string' },
    usage: {
      type: 'object',
      required: ['prompt_tokens', 'completion_tokens', 'total_tokens'],
      properties: { prompt_tokens: { type: 'integer' }, completion_tokens: { type: 'integer' }, total_tokens: { type: 'integer' } },
    },
    cost_usd: { type: 'number' },
    request_id: { type: 'string' },
    // CONTRACT §11: what PII redaction replaced, by kind.
    pii: {
      type: 'object',
      properties: {
        redacted: {
          type: 'object',
          properties: { email: { type: 'integer' }, phone: { type: 'integer' }, card: { type: 'integer' }, iban: { type: 'integer' }, ssn: { type: 'integer' }, ip: { type: 'integer' } },
        },
      },
    },
    // CONTRACT §10/§11: present only when a template was used / a JSON response_format was asked for.
    template_id: { type: 'string' },
    template_version: { type: 'integer' },
    attempts: { type: 'integer' },
  },
} as const;
