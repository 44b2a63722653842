import { Type } from 'typebox';
import { Bool, Int, Json, Num, Str } from '../response-fields.ts';
import { Pii } from './openai-responses.ts';

/**
 * The Message of POST /v1/messages (domain/inference/protocols/anthropic.ts presentMessage) as the route's 200
 * response schema, so fastify writes it with fast-json-stringify (as /v1/chat/completions does). Serialization only: a
 * field missing here is left out of the answer.
 */
const ContentBlock = Type.Object(
  {
    type: Str('text, tool_use, thinking or redacted_thinking.'),
    text: Type.Optional(Str('text: the text.')),
    id: Type.Optional(Str('tool_use: the call id.')),
    name: Type.Optional(Str('tool_use: the tool.')),
    input: Type.Optional(Json('tool_use: its input object.')),
    thinking: Type.Optional(Str('thinking: the text.')),
    signature: Type.Optional(Str('thinking: its signature (send it back as is).')),
    data: Type.Optional(Str('redacted_thinking: its data.')),
  },
  { description: 'A content block.' },
);

export const MessageResponse = Type.Object(
  {
    id: Str('The inference id (inf_…).'),
    type: Type.Literal('message', { description: 'Always "message".' }),
    role: Type.Literal('assistant', { description: 'Always "assistant".' }),
    model: Str('The model that answered.'),
    content: Type.Array(ContentBlock, { description: 'thinking, then text, then tool_use blocks.' }),
    stop_reason: Str('end_turn, max_tokens, tool_use or refusal.'),
    stop_sequence: Type.Null({ description: 'Always null.' }),
    usage: Type.Object(
      {
        input_tokens: Int('Prompt tokens, without the prompt-cache reads and writes.'),
        cache_creation_input_tokens: Int('Prompt tokens written to the provider\'s prompt cache.'),
        cache_read_input_tokens: Int('Prompt tokens read from the provider\'s prompt cache.'),
        output_tokens: Int('Completion tokens (thinking included).'),
      },
      { description: 'Token counts, as Anthropic reports them.' },
    ),
    svc: Type.Object(
      {
        route: Str('The route (provider and model) that served it.'),
        region: Str("The provider's region."),
        cache_hit: Bool('Whether it was answered from the response cache.'),
        cost_usd: Num('What it cost, in USD.'),
        request_id: Str('The request id (request-id, X-Svc-Request-Id).'),
        pii: Type.Optional(Pii),
      },
      { description: 'Where the gateway sent it and what it cost.' },
    ),
  },
  { description: "Anthropic's Message (CONTRACT §19)." },
);

/** POST /v1/messages/count_tokens. */
export const CountTokensResponse = Type.Object(
  { input_tokens: Int("The prompt's tokens as the gateway counts them.") },
  { description: 'The token count of a Messages request.' },
);
