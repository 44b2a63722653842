import { Type, type Static } from 'typebox';
import { IMAGE_TYPES } from '../../../providers/translate.ts';
import { MAX_MESSAGES } from '../schema.ts';

/** The Anthropic Messages API's requests (CONTRACT §19) as TypeBox schemas; the translation is anthropic.ts. */

const says = (problem: string) => ({ 'x-problem': problem });
const TOOL_NAME = '^[A-Za-z0-9_-]{1,64}$';

const CacheControl = Type.Object(
  { type: Type.Literal('ephemeral'), ttl: Type.Optional(Type.Enum(['5m', '1h'])) },
  { additionalProperties: false, ...says('must be {type: "ephemeral"} (ttl "5m" or "1h")') },
);
const TextBlock = Type.Object(
  { type: Type.Literal('text'), text: Type.String(), cache_control: Type.Optional(Type.Union([CacheControl, Type.Null()])), citations: Type.Optional(Type.Unknown()) },
  { additionalProperties: false },
);
const ImageBlock = Type.Object(
  {
    type: Type.Literal('image'),
    source: Type.Union(
      [
        Type.Object(
          {
            type: Type.Literal('base64'),
            media_type: Type.Enum([...IMAGE_TYPES], says('must be one of image/png, image/jpeg, image/gif, image/webp, got {value}')),
            data: Type.String({ minLength: 1 }),
          },
          { additionalProperties: false },
        ),
        Type.Object({ type: Type.Literal('url'), url: Type.String({ minLength: 1 }) }, { additionalProperties: false }),
      ],
      says('must be {type: "base64", media_type, data} or {type: "url", url} (file sources need the Files API)'),
    ),
    cache_control: Type.Optional(Type.Union([CacheControl, Type.Null()])),
  },
  { additionalProperties: false },
);
const ToolUseBlock = Type.Object(
  {
    type: Type.Literal('tool_use'),
    id: Type.String({ minLength: 1 }),
    name: Type.String({ pattern: TOOL_NAME, ...says('must be 1 to 64 letters, digits, "_" or "-", got {value}') }),
    input: Type.Record(Type.String(), Type.Unknown(), says('must be an object')),
    cache_control: Type.Optional(Type.Union([CacheControl, Type.Null()])),
  },
  { additionalProperties: false },
);
const ToolResultBlock = Type.Object(
  {
    type: Type.Literal('tool_result'),
    tool_use_id: Type.String({ minLength: 1 }),
    content: Type.Optional(Type.Union([Type.String(), Type.Array(Type.Union([TextBlock, ImageBlock]))], says('must be a string or an array of text blocks'))),
    is_error: Type.Optional(Type.Boolean()),
    cache_control: Type.Optional(Type.Union([CacheControl, Type.Null()])),
  },
  { additionalProperties: false },
);
const ThinkingBlock = Type.Object(
  { type: Type.Literal('thinking'), thinking: Type.String(), signature: Type.Optional(Type.String()) },
  { additionalProperties: false },
);
const RedactedThinkingBlock = Type.Object({ type: Type.Literal('redacted_thinking'), data: Type.String() }, { additionalProperties: false });
export const ContentBlock = Type.Union(
  [TextBlock, ImageBlock, ToolUseBlock, ToolResultBlock, ThinkingBlock, RedactedThinkingBlock],
  says('must be a content block of type text, image, tool_use, tool_result, thinking or redacted_thinking'),
);
const Message = Type.Object(
  {
    role: Type.Enum(['user', 'assistant', 'system'], says('must be "user", "assistant" or "system", got {value}')),
    content: Type.Union([Type.String(), Type.Array(ContentBlock)], says('must be a string or an array of content blocks')),
  },
  { additionalProperties: false, ...says('must be an object {role, content}') },
);
export const Tool = Type.Object(
  {
    type: Type.Optional(Type.Literal('custom', says('must be "custom": server tools (web search, code execution, …) are not supported, got {value}'))),
    name: Type.String({ pattern: TOOL_NAME, ...says('must be 1 to 64 letters, digits, "_" or "-", got {value}') }),
    description: Type.Optional(Type.String()),
    input_schema: Type.Record(Type.String(), Type.Unknown(), says('must be a JSON Schema object')),
    cache_control: Type.Optional(Type.Union([CacheControl, Type.Null()])),
    strict: Type.Optional(Type.Boolean()),
    // For the anthropic kind (tool search, examples); the other kinds send the tool without them.
    defer_loading: Type.Optional(Type.Boolean()),
    input_examples: Type.Optional(Type.Array(Type.Unknown())),
    eager_input_streaming: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
/** A tool's fields the chat request has no place for: the anthropic kind gets them back (AnthropicExtras.toolFields). */
export const TOOL_EXTRAS = ['cache_control', 'defer_loading', 'input_examples', 'eager_input_streaming'] as const;
const Parallel = { disable_parallel_tool_use: Type.Optional(Type.Boolean()) };
const AnthropicToolChoice = Type.Union(
  [
    Type.Object({ type: Type.Literal('auto'), ...Parallel }, { additionalProperties: false }),
    Type.Object({ type: Type.Literal('any'), ...Parallel }, { additionalProperties: false }),
    Type.Object({ type: Type.Literal('tool'), name: Type.String({ pattern: TOOL_NAME }), ...Parallel }, { additionalProperties: false }),
    Type.Object({ type: Type.Literal('none') }, { additionalProperties: false }),
  ],
  says('must be {type: "auto"}, {type: "any"}, {type: "tool", name} or {type: "none"}'),
);
const Display = Type.Optional(Type.Enum(['summarized', 'omitted'], says('must be "summarized" or "omitted", got {value}')));
const Thinking = Type.Union(
  [
    Type.Object(
      {
        type: Type.Literal('enabled'),
        budget_tokens: Type.Integer({ minimum: 1024, ...says('must be an integer of at least 1024, got {value}') }),
        display: Display,
      },
      { additionalProperties: false },
    ),
    Type.Object({ type: Type.Literal('adaptive'), display: Display }, { additionalProperties: false }),
    Type.Object({ type: Type.Literal('disabled') }, { additionalProperties: false }),
  ],
  says('must be {type: "enabled", budget_tokens}, {type: "adaptive"} or {type: "disabled"}'),
);
/** Context editing (a beta): passed to the anthropic kind; elsewhere clearing thinking is moot, other edits refused. */
const ContextManagement = Type.Object(
  { edits: Type.Optional(Type.Array(Type.Object({ type: Type.String() }, { additionalProperties: true }))) },
  { additionalProperties: true },
);
const OutputConfig = Type.Object(
  {
    effort: Type.Optional(Type.Enum(['low', 'medium', 'high', 'max'], says('must be one of low, medium, high, max, got {value}'))),
    format: Type.Optional(
      Type.Object(
        { type: Type.Literal('json_schema'), schema: Type.Record(Type.String(), Type.Unknown(), says('must be a JSON Schema object')) },
        { additionalProperties: false, ...says('must be {type: "json_schema", schema}') },
      ),
    ),
  },
  { additionalProperties: false },
);

/** What a count_tokens request and a Messages request share. */
const Prompt = {
  model: Type.String({ minLength: 1, ...says('is required: a model id or "auto"') }),
  messages: Type.Array(Message, { minItems: 1, maxItems: MAX_MESSAGES, ...says(`must be a non-empty array of at most ${MAX_MESSAGES} messages`) }),
  system: Type.Optional(Type.Union([Type.String(), Type.Array(TextBlock)], says('must be a string or an array of text blocks'))),
  tools: Type.Optional(Type.Array(Tool, { maxItems: 128, ...says('must be an array of at most 128 tools') })),
  tool_choice: Type.Optional(AnthropicToolChoice),
  thinking: Type.Optional(Thinking),
  context_management: Type.Optional(ContextManagement),
  output_config: Type.Optional(OutputConfig),
};

/** POST /v1/messages: the Messages API request as the official SDKs and Claude Code send it. */
export const MessagesRequest = Type.Object(
  {
    ...Prompt,
    max_tokens: Type.Integer({ minimum: 1, maximum: 1_000_000, ...says('must be an integer from 1 to 1000000, got {value}') }),
    stop_sequences: Type.Optional(Type.Array(Type.String(), { maxItems: 4, ...says('must be an array of at most 4 strings') })),
    temperature: Type.Optional(Type.Number({ minimum: 0, maximum: 1, ...says('must be a number from 0 to 1, got {value}') })),
    top_p: Type.Optional(Type.Number({ minimum: 0, maximum: 1, ...says('must be a number from 0 to 1, got {value}') })),
    top_k: Type.Optional(Type.Integer({ minimum: 0, ...says('must be a non-negative integer, got {value}') })),
    metadata: Type.Optional(
      Type.Object({ user_id: Type.Optional(Type.Union([Type.String({ maxLength: 256 }), Type.Null()])) }, { additionalProperties: false }),
    ),
    stream: Type.Optional(Type.Boolean()),
    // Accepted, without effect here: the gateway routes by its own policy.
    service_tier: Type.Optional(Type.Enum(['auto', 'standard_only'])),
  },
  { additionalProperties: false },
);
export type MessagesRequest = Static<typeof MessagesRequest>;

/** POST /v1/messages/count_tokens. */
export const CountTokensRequest = Type.Object(Prompt, { additionalProperties: false });
export type CountTokensRequest = Static<typeof CountTokensRequest>;
