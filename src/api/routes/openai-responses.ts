import { Type } from 'typebox';
import { Bool, Int, Json, Nullable, NullableStr, Num, ObjectType, Str, TokenUsage, Unix } from '../response-fields.ts';
import { ListOf } from '../list.ts';

/**
 * The response schemas of the OpenAI-compatible routes (api/routes/openai.ts, api/routes/responses.ts): OpenAI's objects as the
 * gateway writes them, with `svc` beside OpenAI's fields. Pieces shared with /v1/inference's answer live here too.
 */

export const ToolCall = Type.Object(
  {
    id: Str('The call id (call_…).'),
    type: Str('Always "function".'),
    function: Type.Object({ name: Str('The function called.'), arguments: Str('Its arguments, a JSON string.') }),
  },
  { description: 'A tool call of the model.' },
);

/** CONTRACT §13: the rag option's sources. */
export const Citation = Type.Object(
  { document_id: Str('The document.'), chunk_id: Str('The chunk.'), score: Num('Relevance: higher is better.') },
  { description: 'A source the rag option gave the model.' },
);

/** CONTRACT §11: what PII redaction replaced, by kind, in the order found. */
export const Pii = Type.Object(
  {
    redacted: Type.Record(Type.String(), Type.Integer(), {
      description: 'Values replaced, by kind (email, phone, card, iban, ssn, ip): only the kinds found.',
    }),
  },
  { description: 'What PII redaction replaced (when it ran).' },
);

/** Where the gateway sent it and what it cost, beside OpenAI's fields (openai.ts svcOf). */
export const Svc = Type.Object(
  {
    route: Str('The route (provider and model) that served it.'),
    region: Str("The provider's region."),
    cache_hit: Bool('Whether it was answered from the response cache.'),
    cost_usd: Num('What it cost, in USD.'),
    request_id: Str('The request id (X-Svc-Request-Id).'),
    template_id: Type.Optional(Str('The prompt template used (CONTRACT §10).')),
    template_version: Type.Optional(Int('Its version.')),
    attempts: Type.Optional(Int('With a JSON response_format: how many answers it took (CONTRACT §11).')),
  },
  { description: 'The gateway\'s own fields.' },
);

const AssistantMessage = Type.Object(
  {
    role: Type.Literal('assistant', { description: 'Always "assistant".' }),
    content: NullableStr('The answer; null when the model only called tools.'),
    refusal: NullableStr("The model's refusal, or null."),
    tool_calls: Type.Optional(Type.Array(ToolCall, { description: 'The tool calls, when the model called tools.' })),
  },
  { description: "The model's message." },
);

/** A chat completion's usage: OpenAI's token counts, with their details when the provider reported cache reads or reasoning. */
export const ChatUsage = Type.Object(
  {
    ...TokenUsage.properties,
    prompt_tokens_details: Type.Optional(
      Type.Object({ cached_tokens: Int("Prompt tokens read from the provider's prompt cache.") }, { description: 'What the prompt tokens were.' }),
    ),
    completion_tokens_details: Type.Optional(
      Type.Object({ reasoning_tokens: Int("The model's reasoning tokens.") }, { description: 'What the completion tokens were.' }),
    ),
  },
  { description: 'Token counts.' },
);

export const ChatCompletion = Type.Object(
  {
    id: Str("The inference's id (inf_…)."),
    object: ObjectType('chat.completion'),
    created: Unix('Created'),
    model: Str('The model that answered.'),
    choices: Type.Array(
      Type.Object({
        index: Int("The choice's index."),
        message: AssistantMessage,
        logprobs: Json("The provider's logprobs object, when asked for; else null."),
        finish_reason: Str('stop, length, tool_calls or content_filter.'),
      }),
      { description: 'The answers (n of them).' },
    ),
    usage: ChatUsage,
    system_fingerprint: Type.Null({ description: 'Always null.' }),
    svc: Svc,
    citations: Type.Optional(Type.Array(Citation, { description: "The rag option's sources, when asked for." })),
    pii: Type.Optional(Pii),
  },
  { description: "OpenAI's chat completion object." },
);

export const Model = Type.Object(
  {
    id: Str('The model id.'),
    object: ObjectType('model'),
    created: Unix('When the gateway started'),
    owned_by: Str('The provider of its cheapest route.'),
    svc: Type.Object(
      {
        type: Str('chat (the chat routes and /v1/responses) or embedding (/v1/embeddings).'),
        routes: Type.Array(
          Type.Object({
            route: Str('The route id.'),
            provider: Str('The provider.'),
            region: Str("The provider's region."),
            input_per_mtok: Num('USD per million input tokens.'),
            output_per_mtok: Num('USD per million output tokens.'),
          }),
          { description: 'Its routes, cheapest first.' },
        ),
      },
      { description: 'Its type and routes.' },
    ),
  },
  { description: "OpenAI's model object." },
);
export const ModelList = ListOf(Model);

export const Embeddings = Type.Object(
  {
    object: Type.Literal('list', { description: 'Always "list".' }),
    data: Type.Array(
      Type.Object({
        object: ObjectType('embedding'),
        index: Int("The input's index."),
        embedding: Type.Union([Type.Array(Type.Number()), Type.String()], {
          description: 'The vector: numbers, or with encoding_format base64 the float32 bytes in base64.',
        }),
      }),
      { description: 'One embedding per input.' },
    ),
    model: Str('The model used.'),
    usage: Type.Object({ prompt_tokens: Int('Input tokens.'), total_tokens: Int('Input tokens.') }, { description: 'Token counts.' }),
    svc: Svc,
  },
  { description: "OpenAI's embeddings list." },
);

const ResponseUsage = Type.Object(
  {
    input_tokens: Int('Input tokens.'),
    input_tokens_details: Type.Object({ cached_tokens: Int('Always 0.') }),
    output_tokens: Int('Output tokens.'),
    output_tokens_details: Type.Object({ reasoning_tokens: Int('Always 0.') }),
    total_tokens: Int('input_tokens + output_tokens.'),
  },
  { description: 'Token counts.' },
);

export const ResponseObject = Type.Object(
  {
    id: Str("The inference's id (inf_…), what GET /v1/inference/{id} reads."),
    object: ObjectType('response'),
    created_at: Unix('Created'),
    status: Str('completed, incomplete (max_output_tokens reached) or in_progress.'),
    background: Bool('Always false.'),
    error: Type.Null({ description: 'Always null (a failure is an error answer).' }),
    incomplete_details: Json('{reason: "max_output_tokens"} when incomplete, else null.'),
    instructions: NullableStr('The instructions given, or null.'),
    max_output_tokens: Nullable(Type.Integer(), 'As given, or null.'),
    model: Str('The model that answered.'),
    output: Type.Array(Json('An output item: a message {type, id, status, role, content} or a function_call {type, id, call_id, name, arguments, status}.'), {
      description: 'The output items: the message (unless the model only called tools), then each function call.',
    }),
    parallel_tool_calls: Bool('As given (default true).'),
    previous_response_id: NullableStr('As given, or null.'),
    reasoning: Type.Object({ effort: NullableStr('As given, or null.'), summary: Type.Null({ description: 'Always null.' }) }),
    store: Bool('As given (default false).'),
    temperature: Num('As given (default 1).'),
    text: Type.Object({ format: Json('The output format as given (default {type: "text"}).') }),
    tool_choice: Json('As given (default "auto").'),
    tools: Type.Array(
      Type.Object({
        type: Type.Literal('function', { description: 'Always "function".' }),
        name: Str('The function name.'),
        description: NullableStr('Its description, or null.'),
        parameters: Json('Its JSON schema, or null.'),
        strict: Bool('As given (default true).'),
      }),
      { description: 'The tools given.' },
    ),
    top_p: Num('As given (default 1).'),
    truncation: Type.Literal('disabled', { description: 'Always "disabled".' }),
    usage: Nullable(ResponseUsage, 'Token counts, or null while in progress.'),
    user: NullableStr('As given, or null.'),
    metadata: Json('As given (default {}).'),
    svc: Type.Optional(Svc),
  },
  { description: "OpenAI's Response object." },
);
