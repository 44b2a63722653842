import { Type, type Static, type TSchema } from 'typebox';
import { RagOption } from '../rag/schema.ts';
import { PiiOption } from '../privacy/schema.ts';
import { InferenceTemplate } from '../templates/schema.ts';

/**
 * The inference inputs (CONTRACT §8, §9): POST /v1/chat/completions and /v1/inference (one request: OpenAI's
 * chat-completions request plus the svc fields), /v1/responses and /v1/embeddings. Each is the fastify route schema
 * and the service's check (through `validatorOf` / `parseInput`, validate.ts), so that a bad field is 400 invalid_request naming it
 * the same way everywhere (`messages[2].role`, `tools[0].function.name`).
 *
 * `x-problem` on a node is what a refusal says after the field's name; `{value}` is the value found.
 */
const says = (problem: string) => ({ 'x-problem': problem });
const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
const Opt = <T extends TSchema>(t: T) => Type.Optional(Nullable(t));

export const CHAT_ROLES = ['system', 'developer', 'user', 'assistant', 'tool'] as const;
export const MAX_MESSAGES = 2_000;
const TOOL_NAME = '^[A-Za-z0-9_-]{1,64}$';

const TextPart = Type.Object({ type: Type.Literal('text'), text: Type.String() }, { additionalProperties: false });
const ImagePart = Type.Object(
  {
    type: Type.Literal('image_url'),
    image_url: Type.Object(
      { url: Type.String({ minLength: 1 }), detail: Type.Optional(Type.Enum(['auto', 'low', 'high'])) },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);
const ContentPart = Type.Union([TextPart, ImagePart], says('must be a content part {type: "text", text} or {type: "image_url", image_url: {url}}'));

const ToolCall = Type.Object(
  {
    id: Type.String({ minLength: 1 }),
    type: Type.Literal('function'),
    function: Type.Object({ name: Type.String({ pattern: TOOL_NAME }), arguments: Type.String() }, { additionalProperties: false }),
  },
  { additionalProperties: false },
);

export const ChatMessageSchema = Type.Object(
  {
    role: Type.Enum([...CHAT_ROLES], says('must be one of system, developer, user, assistant, tool, got {value}')),
    content: Type.Optional(
      Type.Union([Type.String(), Type.Array(ContentPart, { minItems: 1 }), Type.Null()], says('must be a string or an array of content parts')),
    ),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    tool_calls: Type.Optional(Type.Array(ToolCall, { minItems: 1 })),
    tool_call_id: Type.Optional(Type.String({ minLength: 1 })),
    // What an OpenAI client replays from a previous answer's message.
    refusal: Opt(Type.String()),
  },
  { additionalProperties: false, ...says('must be an object {role, content}') },
);

const JsonSchemaObject = Type.Record(Type.String(), Type.Unknown(), says('must be a JSON Schema object'));

export const FunctionToolSchema = Type.Object(
  {
    type: Type.Literal('function'),
    function: Type.Object(
      {
        name: Type.String({ pattern: TOOL_NAME, ...says('must be 1 to 64 letters, digits, "_" or "-", got {value}') }),
        description: Type.Optional(Type.String()),
        parameters: Type.Optional(JsonSchemaObject),
        strict: Opt(Type.Boolean()),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

const ToolChoice = Type.Union(
  [
    Type.Enum(['none', 'auto', 'required']),
    Type.Object(
      { type: Type.Literal('function'), function: Type.Object({ name: Type.String({ pattern: TOOL_NAME }) }, { additionalProperties: false }) },
      { additionalProperties: false },
    ),
  ],
  says('must be "none", "auto", "required" or {type: "function", function: {name}}'),
);

const JsonSchemaFormat = Type.Object(
  {
    name: Type.String({ pattern: TOOL_NAME, ...says('must be 1 to 64 letters, digits, "_" or "-", got {value}') }),
    description: Type.Optional(Type.String()),
    schema: Type.Optional(JsonSchemaObject),
    strict: Opt(Type.Boolean()),
  },
  { additionalProperties: false },
);

const ResponseFormat = Type.Union(
  [
    Type.Object({ type: Type.Literal('text') }, { additionalProperties: false }),
    Type.Object({ type: Type.Literal('json_object') }, { additionalProperties: false }),
    Type.Object({ type: Type.Literal('json_schema'), json_schema: JsonSchemaFormat }, { additionalProperties: false }),
  ],
  says('must be {type: "text"}, {type: "json_object"} or {type: "json_schema", json_schema: {name, schema}}'),
);

const MaxTokens = Type.Integer({ minimum: 1, maximum: 1_000_000, ...says('must be an integer from 1 to 1000000, got {value}') });
const Metadata = Type.Record(
  Type.String(),
  Type.String({ maxLength: 500, ...says('must be a string of at most 500 characters') }),
  says('must be an object of string values'),
);
const Region = Type.String({ pattern: '^[a-z0-9][a-z0-9-]{0,62}$', ...says('must be a lower-case region name such as eu-west-1, got {value}') });
const Cache = Type.Union([Type.Boolean(), Type.Integer(), Type.Null()], says('must be true, false, or a TTL in whole seconds, got {value}'));

/** The svc fields beside OpenAI's (CONTRACT §8): the project, caching, residency, metadata. */
const SvcFields = {
  project_id: Opt(Type.String()),
  cache: Type.Optional(Cache),
  region: Opt(Region),
  metadata: Opt(Metadata),
  rag: Type.Optional(RagOption),
  pii: Opt(PiiOption),
};

/** POST /v1/chat/completions and POST /v1/inference: OpenAI's chat-completions request (CONTRACT §9) plus the svc fields. */
export const ChatCompletionRequest = Type.Object(
  {
    // Both may come from a template (CONTRACT §10); without one, validateInference requires them.
    model: Type.Optional(Type.String({ ...says('is required: a model id or "auto"') })),
    messages: Type.Optional(
      Type.Array(ChatMessageSchema, {
        minItems: 1,
        maxItems: MAX_MESSAGES,
        ...says(`must be a non-empty array of at most ${MAX_MESSAGES} messages`),
      }),
    ),
    template: Type.Optional(InferenceTemplate),
    tools: Type.Optional(Type.Array(FunctionToolSchema, { minItems: 1, maxItems: 128, ...says('must be a non-empty array of at most 128 function tools') })),
    tool_choice: Type.Optional(ToolChoice),
    parallel_tool_calls: Opt(Type.Boolean()),
    response_format: Type.Optional(ResponseFormat),
    max_tokens: Opt(MaxTokens),
    max_completion_tokens: Opt(MaxTokens),
    temperature: Opt(Type.Number({ minimum: 0, maximum: 2, ...says('must be a number from 0 to 2, got {value}') })),
    top_p: Opt(Type.Number({ minimum: 0, maximum: 1, ...says('must be a number from 0 to 1, got {value}') })),
    presence_penalty: Opt(Type.Number({ minimum: -2, maximum: 2, ...says('must be a number from -2 to 2, got {value}') })),
    frequency_penalty: Opt(Type.Number({ minimum: -2, maximum: 2, ...says('must be a number from -2 to 2, got {value}') })),
    stop: Opt(
      Type.Union([Type.String(), Type.Array(Type.String(), { maxItems: 4 })], says('must be a string or an array of at most 4 strings')),
    ),
    n: Opt(Type.Integer({ minimum: 1, maximum: 128, ...says('must be an integer from 1 to 128, got {value}') })),
    seed: Opt(Type.Integer(says('must be an integer, got {value}'))),
    logit_bias: Opt(Type.Record(Type.String({ pattern: '^\\d+$' }), Type.Number({ minimum: -100, maximum: 100 }), says('must map token ids to numbers from -100 to 100'))),
    logprobs: Opt(Type.Boolean()),
    top_logprobs: Opt(Type.Integer({ minimum: 0, maximum: 20, ...says('must be an integer from 0 to 20, got {value}') })),
    user: Opt(Type.String({ maxLength: 256 })),
    reasoning_effort: Opt(Type.Enum(['minimal', 'low', 'medium', 'high'], says('must be one of minimal, low, medium, high, got {value}'))),
    stream: Opt(Type.Boolean()),
    stream_options: Opt(Type.Object({ include_usage: Opt(Type.Boolean()) }, { additionalProperties: false })),
    ...SvcFields,
  },
  { additionalProperties: false },
);
export type ChatCompletionRequest = Static<typeof ChatCompletionRequest>;

/** CONTRACT §9: /v1/inference takes the same messages, tools, tool_choice and response_format (its answer differs). */
export const InferenceRequest = ChatCompletionRequest;
export type InferenceRequest = ChatCompletionRequest;

// ---- POST /v1/responses (the stateless subset of CONTRACT §9) ----

const InputText = Type.Object({ type: Type.Literal('input_text'), text: Type.String() }, { additionalProperties: false });
const OutputText = Type.Object(
  { type: Type.Literal('output_text'), text: Type.String(), annotations: Type.Optional(Type.Array(Type.Unknown())), logprobs: Type.Optional(Type.Array(Type.Unknown())) },
  { additionalProperties: false },
);
const InputImage = Type.Object(
  {
    type: Type.Literal('input_image'),
    image_url: Type.String({ minLength: 1, ...says('is required: the image URL or data: URL (file_id needs stored files)') }),
    detail: Type.Optional(Type.Enum(['auto', 'low', 'high'])),
  },
  { additionalProperties: false },
);
const Refusal = Type.Object({ type: Type.Literal('refusal'), refusal: Type.String() }, { additionalProperties: false });
const InputContent = Type.Union(
  [InputText, OutputText, InputImage, Refusal],
  says('must be a content part of type input_text, output_text, input_image or refusal'),
);

const MessageItem = Type.Object(
  {
    type: Type.Optional(Type.Literal('message')),
    id: Type.Optional(Type.String()),
    status: Type.Optional(Type.String()),
    role: Type.Enum(['user', 'assistant', 'system', 'developer'], says('must be one of user, assistant, system, developer, got {value}')),
    content: Type.Union([Type.String(), Type.Array(InputContent)], says('must be a string or an array of content parts')),
  },
  { additionalProperties: false },
);
const FunctionCallItem = Type.Object(
  {
    type: Type.Literal('function_call'),
    id: Type.Optional(Type.String()),
    status: Type.Optional(Type.String()),
    call_id: Type.String({ minLength: 1 }),
    name: Type.String({ pattern: TOOL_NAME }),
    arguments: Type.String(),
  },
  { additionalProperties: false },
);
const FunctionCallOutputItem = Type.Object(
  {
    type: Type.Literal('function_call_output'),
    id: Type.Optional(Type.String()),
    status: Type.Optional(Type.String()),
    call_id: Type.String({ minLength: 1 }),
    output: Type.Union([Type.String(), Type.Array(InputContent)], says('must be a string or an array of content parts')),
  },
  { additionalProperties: false },
);
/** Reasoning items a client replays are dropped: the gateway's models return none it could continue. */
const ReasoningItem = Type.Object(
  { type: Type.Literal('reasoning'), id: Type.Optional(Type.String()) },
  { additionalProperties: true },
);
const InputItem = Type.Union(
  [MessageItem, FunctionCallItem, FunctionCallOutputItem, ReasoningItem],
  says('must be a message, function_call, function_call_output or reasoning item (item_reference needs stored responses)'),
);

const ResponsesFunctionTool = Type.Object(
  {
    type: Type.Literal('function', says('must be "function": only function tools are supported, got {value}')),
    name: Type.String({ pattern: TOOL_NAME, ...says('must be 1 to 64 letters, digits, "_" or "-", got {value}') }),
    description: Opt(Type.String()),
    parameters: Opt(JsonSchemaObject),
    strict: Opt(Type.Boolean()),
  },
  { additionalProperties: false },
);

const ResponsesFormat = Type.Union(
  [
    Type.Object({ type: Type.Literal('text') }, { additionalProperties: false }),
    Type.Object({ type: Type.Literal('json_object') }, { additionalProperties: false }),
    Type.Object(
      {
        type: Type.Literal('json_schema'),
        name: Type.String({ pattern: TOOL_NAME, ...says('must be 1 to 64 letters, digits, "_" or "-", got {value}') }),
        description: Type.Optional(Type.String()),
        schema: JsonSchemaObject,
        strict: Opt(Type.Boolean()),
      },
      { additionalProperties: false },
    ),
  ],
  says('must be {type: "text"}, {type: "json_object"} or {type: "json_schema", name, schema}'),
);

export const ResponsesRequest = Type.Object(
  {
    // Both may come from a template (CONTRACT §10); without one, they are required (responses.ts, validateInference).
    model: Type.Optional(Type.String({ ...says('is required: a model id or "auto"') })),
    input: Type.Optional(
      Type.Union(
        [Type.String(), Type.Array(InputItem, { minItems: 1, maxItems: MAX_MESSAGES })],
        says(`must be a string or a non-empty array of at most ${MAX_MESSAGES} input items`),
      ),
    ),
    template: Type.Optional(InferenceTemplate),
    instructions: Opt(Type.String()),
    max_output_tokens: Opt(MaxTokens),
    temperature: Opt(Type.Number({ minimum: 0, maximum: 2, ...says('must be a number from 0 to 2, got {value}') })),
    top_p: Opt(Type.Number({ minimum: 0, maximum: 1, ...says('must be a number from 0 to 1, got {value}') })),
    tools: Type.Optional(Type.Array(ResponsesFunctionTool, { maxItems: 128 })),
    tool_choice: Type.Optional(
      Type.Union(
        [
          Type.Enum(['none', 'auto', 'required']),
          Type.Object({ type: Type.Literal('function'), name: Type.String({ pattern: TOOL_NAME }) }, { additionalProperties: false }),
        ],
        says('must be "none", "auto", "required" or {type: "function", name}'),
      ),
    ),
    parallel_tool_calls: Opt(Type.Boolean()),
    text: Opt(
      Type.Object(
        { format: Type.Optional(ResponsesFormat), verbosity: Opt(Type.Enum(['low', 'medium', 'high'])) },
        { additionalProperties: false },
      ),
    ),
    reasoning: Opt(
      Type.Object(
        { effort: Opt(Type.Enum(['minimal', 'low', 'medium', 'high'])), summary: Opt(Type.String()) },
        { additionalProperties: false },
      ),
    ),
    stream: Opt(Type.Boolean()),
    store: Opt(Type.Boolean()),
    previous_response_id: Opt(Type.String()),
    user: Opt(Type.String({ maxLength: 256 })),
    safety_identifier: Opt(Type.String({ maxLength: 256 })),
    top_logprobs: Opt(Type.Integer({ minimum: 0, maximum: 20 })),
    // Accepted and without effect here: what clients send by default.
    include: Opt(Type.Array(Type.String())),
    truncation: Opt(Type.Enum(['auto', 'disabled'])),
    service_tier: Opt(Type.String()),
    prompt_cache_key: Opt(Type.String()),
    ...SvcFields,
  },
  { additionalProperties: false },
);
export type ResponsesRequest = Static<typeof ResponsesRequest>;

// ---- POST /v1/embeddings ----

export const EmbeddingsRequest = Type.Object(
  {
    model: Type.String({ minLength: 1, ...says('is required: an embedding model id') }),
    input: Type.Union(
      [Type.String(), Type.Array(Type.String(), { minItems: 1, maxItems: 2048 })],
      says('must be a string or a non-empty array of at most 2048 strings (token arrays are not supported)'),
    ),
    dimensions: Type.Optional(Type.Integer({ minimum: 1, maximum: 4096, ...says('must be an integer from 1 to 4096, got {value}') })),
    encoding_format: Type.Optional(Type.Enum(['float', 'base64'], says('must be "float" or "base64", got {value}'))),
    user: Opt(Type.String({ maxLength: 256 })),
    project_id: Opt(Type.String()),
    region: Opt(Region),
    metadata: Opt(Metadata),
  },
  { additionalProperties: false },
);
export type EmbeddingsRequest = Static<typeof EmbeddingsRequest>;

/** The query of these routes: the operator may name the project there too (CONTRACT §2). */
export const ProjectQuery = Type.Object({ project_id: Type.Optional(Type.String()) }, { additionalProperties: false });
