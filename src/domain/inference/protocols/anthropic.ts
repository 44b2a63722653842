import { Type, type Static } from 'typebox';
import { invalid, SvcError } from '../../../errors/svc-error.ts';
import { microsToUsd } from '../../../kernel/money.ts';
import { countPromptTokens, estimateTokens } from '../../../limits/tokens.ts';
import type { AnthropicExtras, ChatMessage, ContentPart, FunctionTool, ToolCall, ToolChoice } from '../../../providers/types.ts';
import { IMAGE_TYPES } from '../../../providers/translate.ts';
import { InferenceRequest, MAX_MESSAGES } from '../schema.ts';
import type { InferenceResult, InferenceStream, StreamEvent, ThinkingEvent } from '../types.ts';
import { markChecked } from '../validator.ts';

/**
 * The Anthropic Messages API (CONTRACT §19: POST /v1/messages and /v1/messages/count_tokens) translated to the
 * gateway's chat request and back, in one place for both directions: the request (schema and translation), the
 * Message answer, and the stream's event sequence. The pipeline and every provider kind run as for
 * /v1/chat/completions; what the chat request has no field for (cache_control, thinking blocks, top_k, the thinking
 * config, context edits, effort, anthropic-beta, is_error) rides along as ChatOptions.anthropic, which the anthropic kind puts back on its
 * wire (providers/anthropic.ts toAnthropic: the same mapping the kind uses for every request), bedrock's cache points
 * aside the other kinds drop or refuse (providers/translate.ts extrasUnsupported).
 */

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
const ContentBlock = Type.Union(
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
const Tool = Type.Object(
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
const TOOL_EXTRAS = ['cache_control', 'defer_loading', 'input_examples', 'eager_input_streaming'] as const;
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

type Block = Static<typeof ContentBlock>;

/** Where each internal message (and its parts and tool calls) came from in the Anthropic request, for error params. */
export interface Origins {
  messages: string[];
  parts: Map<number, string[]>;
  calls: Map<number, string[]>;
}

export interface TranslatedMessages {
  request: InferenceRequest;
  /** The request's messages (request.messages) as the provider types name them. */
  messages: ChatMessage[];
  extras: AnthropicExtras | undefined;
  origins: Origins;
}

const at = (m: number, b?: number) => (b === undefined ? `messages[${m}]` : `messages[${m}].content[${b}]`);

/** The chat request (and its extras) of a Messages (or count_tokens) request that passed its schema. */
export function chatRequestOfMessages(r: MessagesRequest | CountTokensRequest, beta?: string): TranslatedMessages {
  const messages: ChatMessage[] = [];
  const origins: Origins = { messages: [], parts: new Map(), calls: new Map() };
  const cache: Record<string, unknown> = {};
  const thinkingBlocks: Record<number, Record<string, unknown>[]> = {};
  const toolErrors: number[] = [];
  const toolFields: Record<number, Record<string, unknown>> = {};
  const inlineSystem: number[] = [];
  const push = (m: ChatMessage, origin: string) => {
    messages.push(m);
    origins.messages.push(origin);
    return messages.length - 1;
  };

  if (typeof r.system === 'string') {
    if (r.system !== '') push({ role: 'system', content: r.system }, 'system');
  } else if (r.system) {
    r.system.forEach((b, k) => {
      const i = push({ role: 'system', content: b.text }, `system[${k}]`);
      if (b.cache_control) cache[`system.${i}`] = b.cache_control;
    });
  }

  r.messages.forEach((msg, m) => {
    if (typeof msg.content === 'string') {
      const i = push({ role: msg.role, content: msg.content }, at(m));
      if (msg.role === 'system') inlineSystem.push(i);
      return;
    }
    const blocks = msg.content as Block[];
    if (msg.role === 'system') {
      // A system message among the messages: its text blocks, kept in place for the anthropic kind.
      const parts = blocks.map((b, k): ContentPart => {
        if (b.type !== 'text') throw invalid(`${at(m, k)}.type`, `A system message carries text blocks, not ${b.type}.`);
        return { type: 'text', text: b.text };
      });
      const i = push({ role: 'system', content: parts.length > 0 ? parts : '' }, at(m));
      origins.parts.set(i, blocks.map((_, k) => at(m, k)));
      inlineSystem.push(i);
      blocks.forEach((b, k) => {
        if (b.type === 'text' && b.cache_control) cache[`${i}.${k}`] = b.cache_control;
      });
      return;
    }
    if (msg.role === 'user') {
      // Tool results first (Anthropic requires them to open the turn; OpenAI wants them right after the calls).
      blocks.forEach((b, k) => {
        if (b.type !== 'tool_result') return;
        const i = push({ role: 'tool', tool_call_id: b.tool_use_id, content: toolResultText(b, m, k) }, at(m, k));
        origins.parts.set(i, [at(m, k)]);
        if (b.is_error) toolErrors.push(i);
        if (b.cache_control) cache[`${i}.0`] = b.cache_control;
      });
      const parts: ContentPart[] = [];
      const from: string[] = [];
      const marks: Array<[number, unknown]> = [];
      blocks.forEach((b, k) => {
        if (b.type === 'tool_result') return;
        if (b.type === 'text') parts.push({ type: 'text', text: b.text });
        else if (b.type === 'image') parts.push({ type: 'image_url', image_url: { url: imageUrl(b) } });
        else throw invalid(`${at(m, k)}.type`, `A user message carries text, image and tool_result blocks, not ${b.type}.`);
        if (b.cache_control) marks.push([parts.length - 1, b.cache_control]);
        from.push(at(m, k));
      });
      if (parts.length > 0 || blocks.length === 0) {
        const i = push({ role: 'user', content: parts.length > 0 ? parts : '' }, at(m));
        origins.parts.set(i, from);
        for (const [j, cc] of marks) cache[`${i}.${j}`] = cc;
      }
      return;
    }
    // An assistant turn: its thinking blocks kept aside, its text joined, its tool_use blocks as tool calls.
    let text = '';
    let textCache: unknown;
    const thinking: Record<string, unknown>[] = [];
    const calls: ToolCall[] = [];
    const callFrom: string[] = [];
    const callCache: unknown[] = [];
    blocks.forEach((b, k) => {
      if (b.type === 'text') {
        text += b.text;
        textCache = b.cache_control ?? textCache;
      } else if (b.type === 'thinking' || b.type === 'redacted_thinking') thinking.push(b);
      else if (b.type === 'tool_use') {
        calls.push({ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input) } });
        callFrom.push(at(m, k));
        callCache.push(b.cache_control);
      } else throw invalid(`${at(m, k)}.type`, `An assistant message carries text, tool_use and thinking blocks, not ${b.type}.`);
    });
    const i = push(
      calls.length > 0 ? { role: 'assistant', content: text === '' ? null : text, tool_calls: calls } : { role: 'assistant', content: text },
      at(m),
    );
    origins.calls.set(i, callFrom);
    if (thinking.length > 0) thinkingBlocks[i] = thinking;
    // The anthropic kind's block order for this message: thinking, text (when any), tool_use (toAnthropic).
    const first = thinking.length + (text === '' ? 0 : 1);
    if (textCache && text !== '') cache[`${i}.${thinking.length}`] = textCache;
    callCache.forEach((cc, k) => {
      if (cc) cache[`${i}.${first + k}`] = cc;
    });
  });

  const out: InferenceRequest = { model: r.model, messages: messages as InferenceRequest['messages'] };
  if (r.tools && r.tools.length > 0) {
    out.tools = r.tools.map(
      (t): FunctionTool => ({
        type: 'function',
        function: {
          name: t.name,
          ...(t.description !== undefined ? { description: t.description } : {}),
          parameters: t.input_schema,
          ...(t.strict !== undefined ? { strict: t.strict } : {}),
        },
      }),
    ) as InferenceRequest['tools'];
    r.tools.forEach((t, k) => {
      const more: Record<string, unknown> = {};
      for (const f of TOOL_EXTRAS) if (t[f] != null) more[f] = t[f];
      if (Object.keys(more).length > 0) (toolFields[k] = more);
    });
  }
  const c = r.tool_choice;
  if (c) {
    const choice: ToolChoice = c.type === 'auto' ? 'auto' : c.type === 'any' ? 'required' : c.type === 'none' ? 'none' : { type: 'function', function: { name: c.name } };
    // Anthropic lets tool_choice stand without tools; the chat request only "none".
    if (out.tools || choice === 'none') out.tool_choice = choice;
    if ('disable_parallel_tool_use' in c && c.disable_parallel_tool_use === true && out.tools) out.parallel_tool_calls = false;
  }
  if ('max_tokens' in r) {
    out.max_tokens = r.max_tokens;
    if (r.stop_sequences && r.stop_sequences.length > 0) out.stop = r.stop_sequences;
    if (r.temperature !== undefined) out.temperature = r.temperature;
    if (r.top_p !== undefined) out.top_p = r.top_p;
    if (r.metadata?.user_id != null) out.user = r.metadata.user_id;
    if (r.stream !== undefined) out.stream = r.stream;
  }

  if (r.output_config?.format) {
    out.response_format = { type: 'json_schema', json_schema: { name: 'output', schema: r.output_config.format.schema } } as InferenceRequest['response_format'];
  }

  const extras: AnthropicExtras = {};
  if (beta) extras.beta = beta;
  const fields: Record<string, unknown> = {};
  if ('top_k' in r && r.top_k !== undefined) fields.top_k = r.top_k;
  if (r.thinking) fields.thinking = r.thinking;
  if (r.context_management) fields.context_management = r.context_management;
  if (r.output_config?.effort) fields.output_config = { effort: r.output_config.effort };
  if (Object.keys(fields).length > 0) extras.fields = fields;
  if (Object.keys(cache).length > 0) extras.cacheControl = cache;
  if (Object.keys(toolFields).length > 0) extras.toolFields = toolFields;
  if (Object.keys(thinkingBlocks).length > 0) extras.thinking_blocks = thinkingBlocks;
  if (toolErrors.length > 0) extras.tool_errors = toolErrors;
  if (inlineSystem.length > 0) extras.inline_system = inlineSystem;
  return { request: markChecked(InferenceRequest, out), messages, extras: Object.keys(extras).length > 0 ? extras : undefined, origins };
}

function imageUrl(b: Extract<Block, { type: 'image' }>): string {
  return b.source.type === 'base64' ? `data:${b.source.media_type};base64,${b.source.data}` : b.source.url;
}

/** A tool_result's content as the tool message's text: a string, or its text blocks joined. */
function toolResultText(b: Extract<Block, { type: 'tool_result' }>, m: number, k: number): string {
  if (b.content === undefined) return '';
  if (typeof b.content === 'string') return b.content;
  let text = '';
  b.content.forEach((part, j) => {
    if (part.type !== 'text') throw invalid(`${at(m, k)}.content[${j}]`, 'Images in a tool_result are not supported: send the image in a text-free user block instead.');
    text += part.text;
  });
  return text;
}

/**
 * A refusal naming a field of the chat request (`messages[3].content[0]`, `tools[1].function.name`, `stop`) as the
 * Anthropic request names it (`messages[1].content[2]`, `tools[1].name`, `stop_sequences`).
 */
export function anthropicParam(param: string, o: Origins): string {
  const msg = /^messages\[(\d+)\](.*)$/.exec(param);
  if (msg) {
    const i = Number(msg[1]);
    const rest = msg[2]!;
    const part = /^\.content\[(\d+)\]/.exec(rest);
    if (part) return o.parts.get(i)?.[Number(part[1])] ?? o.messages[i] ?? 'messages';
    const call = /^\.tool_calls\[(\d+)\]/.exec(rest);
    if (call) return o.calls.get(i)?.[Number(call[1])] ?? o.messages[i] ?? 'messages';
    if (rest === '.tool_call_id') return `${o.parts.get(i)?.[0] ?? o.messages[i]}.tool_use_id`;
    return o.messages[i] ?? 'messages';
  }
  const tool = /^tools\[(\d+)\]\.function\.(\w+)(.*)$/.exec(param);
  if (tool) return `tools[${tool[1]}].${tool[2] === 'parameters' ? 'input_schema' : tool[2]}${tool[3]}`;
  if (param === 'stop' || param.startsWith('stop[')) return param.replace(/^stop/, 'stop_sequences');
  if (param === 'user') return 'metadata.user_id';
  if (param === 'max_completion_tokens') return 'max_tokens';
  if (param === 'parallel_tool_calls') return 'tool_choice.disable_parallel_tool_use';
  return param;
}

/** The same error, its param (and the message's mention of it) in the Anthropic request's names. */
export function inAnthropicNames(err: unknown, o: Origins): unknown {
  if (!(err instanceof SvcError) || err.param === null) return err;
  const param = anthropicParam(err.param, o);
  if (param === err.param) return err;
  return new SvcError(err.code, { param, message: err.message.split(err.param).join(param), headers: err.headers, details: err.details, cause: err.cause });
}

// ---- the answer ----

/** The chat finish_reason as Anthropic's stop_reason. */
export function stopReason(finish: string): string {
  switch (finish) {
    case 'length':
      return 'max_tokens';
    case 'tool_calls':
      return 'tool_use';
    case 'content_filter':
      return 'refusal';
    default:
      return 'end_turn';
  }
}

const toolInput = (args: string): unknown => {
  try {
    const v = JSON.parse(args === '' ? '{}' : args);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
};

/** The answer's content blocks: its thinking (anthropic kind), its text (unless the model only called tools), then a
 *  tool_use block per call. */
function contentOf(r: Pick<InferenceResult, 'content' | 'toolCalls' | 'thinking'>) {
  const blocks: Record<string, unknown>[] = [...(r.thinking ?? [])];
  if (r.content !== '' || !r.toolCalls) blocks.push({ type: 'text', text: r.content });
  for (const c of r.toolCalls ?? []) blocks.push({ type: 'tool_use', id: c.id, name: c.function.name, input: toolInput(c.function.arguments) });
  return blocks;
}

/** Where the gateway sent it and what it cost, beside Anthropic's fields (as on /v1/chat/completions). */
export function svcFields(r: InferenceResult) {
  return { route: r.route, region: r.region, cache_hit: r.cacheHit, cost_usd: microsToUsd(r.costMicros), request_id: r.requestId, ...(r.pii ? { pii: r.pii } : {}) };
}

/** The Message object. */
export function presentMessage(r: InferenceResult) {
  return {
    id: r.id,
    type: 'message' as const,
    role: 'assistant' as const,
    model: r.model,
    content: contentOf(r),
    stop_reason: stopReason(r.finishReason),
    stop_sequence: null,
    usage: { input_tokens: r.promptTokens, output_tokens: r.completionTokens },
    svc: svcFields(r),
  };
}

/** The prompt's tokens as the token reservation estimates them (message_start's input_tokens, before the answer). */
export const estimatedInputTokens = (messages: ChatMessage[], extraTokens: number): number => estimateTokens(messages, 0) + extraTokens;

/** count_tokens: the messages' text counted by the gateway's tokenizer, plus what the text does not show (tool
 *  definitions and calls, images) as the validation counts it. */
export async function countInputTokens(messages: ChatMessage[], extraTokens: number): Promise<number> {
  return (await countPromptTokens(messages)) + extraTokens;
}

// ---- the stream ----

export interface AnthropicEvent {
  event: string;
  data: Record<string, unknown>;
}

/**
 * The stream's events in Anthropic's order: message_start, ping, then per block content_block_start, its deltas
 * (thinking_delta and signature_delta, text_delta, input_json_delta), content_block_stop, and message_delta (stop_reason, usage), message_stop; an
 * `error` event when the provider fails after the first token. Choice 0 only (a Messages request has one).
 */
export class MessageEvents {
  private index = -1;
  private open: 'text' | 'tool' | 'thinking' | null = null;
  private readonly toolBlock = new Map<number, number>();
  private readonly thinkingBlock = new Map<number, number>();

  constructor(private readonly inputTokens: number) {}

  start(head: InferenceStream['head']): AnthropicEvent[] {
    return [
      {
        event: 'message_start',
        data: {
          type: 'message_start',
          message: {
            id: head.id,
            type: 'message',
            role: 'assistant',
            model: head.model,
            content: [],
            stop_reason: null,
            stop_sequence: null,
            usage: { input_tokens: this.inputTokens, output_tokens: 0 },
          },
        },
      },
      { event: 'ping', data: { type: 'ping' } },
    ];
  }

  private close(out: AnthropicEvent[]): void {
    if (this.open !== null) out.push({ event: 'content_block_stop', data: { type: 'content_block_stop', index: this.index } });
    this.open = null;
  }

  private begin(out: AnthropicEvent[], kind: 'text' | 'tool' | 'thinking', block: Record<string, unknown>): void {
    this.close(out);
    this.index++;
    this.open = kind;
    out.push({ event: 'content_block_start', data: { type: 'content_block_start', index: this.index, content_block: block } });
  }

  private delta(out: AnthropicEvent[], delta: Record<string, unknown>): void {
    out.push({ event: 'content_block_delta', data: { type: 'content_block_delta', index: this.index, delta } });
  }

  event(e: StreamEvent | ThinkingEvent): AnthropicEvent[] {
    const out: AnthropicEvent[] = [];
    if (e.type === 'thinking') {
      if (e.redacted !== undefined) {
        this.begin(out, 'thinking', { type: 'redacted_thinking', data: e.redacted });
        this.thinkingBlock.set(e.index, this.index);
        return out;
      }
      if (this.open !== 'thinking' || this.thinkingBlock.get(e.index) !== this.index) {
        this.begin(out, 'thinking', { type: 'thinking', thinking: '', signature: '' });
        this.thinkingBlock.set(e.index, this.index);
      }
      if (e.thinking) this.delta(out, { type: 'thinking_delta', thinking: e.thinking });
      if (e.signature) this.delta(out, { type: 'signature_delta', signature: e.signature });
    } else if (e.type === 'delta') {
      if (e.choice || e.content === '') return out;
      if (this.open !== 'text') this.begin(out, 'text', { type: 'text', text: '' });
      this.delta(out, { type: 'text_delta', text: e.content });
    } else if (e.type === 'tool_call') {
      if (e.choice) return out;
      if (e.id !== undefined || e.name !== undefined || !this.toolBlock.has(e.index)) {
        this.begin(out, 'tool', { type: 'tool_use', id: e.id ?? '', name: e.name ?? '', input: {} });
        this.toolBlock.set(e.index, this.index);
      }
      // Pieces of a call whose block has closed cannot be sent in Anthropic's sequence; the kinds send calls in order.
      if (e.arguments !== '' && this.toolBlock.get(e.index) === this.index) {
        this.delta(out, { type: 'input_json_delta', partial_json: e.arguments });
      }
    } else if (e.type === 'done') {
      const r = e.result;
      this.close(out);
      out.push({
        event: 'message_delta',
        data: {
          type: 'message_delta',
          delta: { stop_reason: stopReason(r.finishReason), stop_sequence: null },
          usage: { input_tokens: r.promptTokens, output_tokens: r.completionTokens },
          svc: svcFields(r),
        },
      });
      out.push({ event: 'message_stop', data: { type: 'message_stop' } });
    }
    return out;
  }
}

/** The svc error codes as Anthropic's error types (what its SDKs and Claude Code read). */
export function anthropicErrorType(code: string, status: number): string {
  if (code === 'budget_exceeded') return 'billing_error';
  switch (status) {
    case 400:
    case 409:
    case 422:
      return 'invalid_request_error';
    case 401:
      return 'authentication_error';
    case 402:
      return 'billing_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 408:
    case 504:
      return 'timeout_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 503:
    case 529:
      return 'overloaded_error';
    default:
      return 'api_error';
  }
}
