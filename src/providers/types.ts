import type { EventEmitter } from 'node:events';
/**
 * The one interface every model provider adapter implements. The gateway's internal request is OpenAI's
 * chat-completions request (its public surface is OpenAI-compatible); each adapter translates it to and from its own
 * wire format (kinds `openai`, `mock`, `azure_openai`, `anthropic`, `gemini`, `bedrock`).
 */

/**
 * What a provider call reads of its abort signal: whether and why it was aborted, and its 'abort' event (undici takes
 * an EventEmitter as a request's signal as well as an AbortSignal). The router's hops use the lighter EventEmitter
 * form (router.ts, HopSignal): an AbortController and its EventTarget listeners per provider call were measurable.
 */
export type ProviderSignal = AbortSignal | (EventEmitter & { readonly aborted: boolean; readonly reason: unknown });

export type ProviderKind = 'openai' | 'mock' | 'azure_openai' | 'anthropic' | 'gemini' | 'bedrock';

export type ChatRole = 'system' | 'developer' | 'user' | 'assistant' | 'tool';

/** CONTRACT §9: content is a string or an array of parts. */
export type ContentPart =
  | { type: 'text'; text: string }
  | { type: 'image_url'; image_url: { url: string; detail?: 'auto' | 'low' | 'high' } };

/** An assistant's call of a function tool; `arguments` is the JSON text the model wrote. */
export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ChatMessage {
  role: ChatRole;
  /** null only on an assistant message that carries tool_calls. */
  content: string | ContentPart[] | null;
  name?: string;
  /** role assistant. */
  tool_calls?: ToolCall[];
  /** role tool: the call this message answers. */
  tool_call_id?: string;
}

export interface FunctionTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean };
}

export type ToolChoice = 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } };

export type ResponseFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; json_schema: { name: string; description?: string; schema?: Record<string, unknown>; strict?: boolean } };

/** Sampling parameters passed through to the provider as given (OpenAI names). */
export interface Sampling {
  temperature?: number;
  top_p?: number;
  stop?: string | string[];
  seed?: number;
  presence_penalty?: number;
  frequency_penalty?: number;
}

/**
 * The rest of the chat-completions request (CONTRACT §9), OpenAI names. A kind that cannot carry a field that is set
 * says so through `Provider.unsupported` (the gateway answers 400 invalid_request naming it when no route can).
 */
export interface ChatOptions {
  tools?: FunctionTool[];
  tool_choice?: ToolChoice;
  parallel_tool_calls?: boolean;
  response_format?: ResponseFormat;
  n?: number;
  logit_bias?: Record<string, number>;
  logprobs?: boolean;
  top_logprobs?: number;
  user?: string;
  reasoning_effort?: 'minimal' | 'low' | 'medium' | 'high';
  /** What an Anthropic Messages request (POST /v1/messages) carries beyond these fields (AnthropicExtras). */
  anthropic?: AnthropicExtras;
}

/**
 * The parts of an Anthropic Messages request the chat-completions request has no field for, by the place of the
 * internal message they belong to. The anthropic kind carries them all; the other kinds drop cache_control, history
 * thinking blocks and hints (adaptive thinking, effort, defer_loading, clear_thinking edits) and refuse what would
 * change the answer (`top_k`, an enabled `thinking` budget, other context edits): translate.ts, extrasUnsupported.
 */
export interface AnthropicExtras {
  /** The anthropic-beta header, passed on as given. */
  beta?: string;
  /** Top-level fields for the anthropic kind's body, as sent: top_k, thinking, context_management, output_config. */
  fields?: Record<string, unknown>;
  /** cache_control by place: `system.<i>` (internal message i), `<i>.<b>` (block b of message i's blocks). */
  cacheControl?: Record<string, unknown>;
  /** A tool's fields beyond name, description and input_schema (cache_control, defer_loading, …), by tool index. */
  toolFields?: Record<number, Record<string, unknown>>;
  /** The thinking and redacted_thinking blocks that open assistant message i. */
  thinking_blocks?: Record<number, Record<string, unknown>[]>;
  /** Tool messages (by index) whose tool_result had is_error: true. */
  tool_errors?: number[];
  /** System messages (by index) that stood among the messages (role "system" there), not in the top-level system. */
  inline_system?: number[];
}

export interface ProviderRequest {
  model: string;
  messages: ChatMessage[];
  maxTokens?: number;
  sampling: Sampling;
  options?: ChatOptions;
  /** Aborts the call (client gone, hop timeout, routing timeout); undici tears the upstream request down. */
  signal: ProviderSignal;
}

/**
 * Token counts as the provider reported them. `promptTokens` is the whole prompt (OpenAI's prompt_tokens: cache reads
 * and writes included, whatever the provider's own split); `completionTokens` the whole output (reasoning included).
 * The optional parts say how much of each was what; a cache price in the providers file bills them (kernel/money.ts).
 */
export interface ProviderUsage {
  promptTokens: number;
  completionTokens: number;
  /** Of promptTokens: read from the provider's prompt cache (Anthropic cache_read_input_tokens, Bedrock
   *  cacheReadInputTokens, OpenAI prompt_tokens_details.cached_tokens, Gemini cachedContentTokenCount). */
  cacheReadTokens?: number;
  /** Of promptTokens: written to the prompt cache (Anthropic cache_creation_input_tokens, Bedrock cacheWriteInputTokens). */
  cacheWriteTokens?: number;
  /** Of completionTokens: the model's reasoning (Gemini thoughtsTokenCount, OpenAI completion_tokens_details.reasoning_tokens). */
  reasoningTokens?: number;
}

/** The optional parts of a provider's usage that are set and non-zero (none: {}), for spreading into a ProviderUsage. */
export function usageParts(cacheRead: unknown, cacheWrite: unknown, reasoning: unknown): Pick<ProviderUsage, 'cacheReadTokens' | 'cacheWriteTokens' | 'reasoningTokens'> {
  const n = (v: unknown) => (typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : 0);
  const out: Pick<ProviderUsage, 'cacheReadTokens' | 'cacheWriteTokens' | 'reasoningTokens'> = {};
  if (n(cacheRead)) out.cacheReadTokens = n(cacheRead);
  if (n(cacheWrite)) out.cacheWriteTokens = n(cacheWrite);
  if (n(reasoning)) out.reasoningTokens = n(reasoning);
  return out;
}

/** One choice of an answer (n > 1 gives several; choice 0 is also the Completion's own fields). */
export interface Choice {
  index: number;
  content: string | null;
  finishReason: string;
  toolCalls?: ToolCall[];
  /** The provider's logprobs object, passed through as given. */
  logprobs?: unknown;
  refusal?: string | null;
}

/** A thinking block of an Anthropic answer, kept for the /v1/messages surface (a client sends it back with tool results). */
export type ThinkingBlock = { type: 'thinking'; thinking: string; signature: string } | { type: 'redacted_thinking'; data: string };

export interface Completion {
  /** Choice 0's text ('' when it only called tools). */
  content: string;
  /** The anthropic kind's thinking blocks, when the model thought (thinking enabled through /v1/messages). */
  thinking?: ThinkingBlock[];
  finishReason: string;
  toolCalls?: ToolCall[];
  logprobs?: unknown;
  /** Present when the request asked for n > 1: every choice, choice 0 included. */
  choices?: Choice[];
  /** Null when the provider reported none; the gateway then counts the tokens itself. */
  usage: ProviderUsage | null;
}

export type StreamPart =
  | { type: 'delta'; content: string; choice?: number }
  /** A piece of a tool call: the first piece of call `index` has its id and name, later ones more argument text. */
  | { type: 'tool_call'; index: number; id?: string; name?: string; arguments: string; choice?: number }
  | { type: 'logprobs'; logprobs: unknown; choice?: number }
  | { type: 'finish'; finishReason: string; choice?: number }
  | { type: 'usage'; usage: ProviderUsage }
  /** A piece of thinking block `index` (anthropic kind): its text, its signature, or a redacted block's data. */
  | { type: 'thinking'; index: number; thinking?: string; signature?: string; redacted?: string };

/** CONTRACT §9: POST /v1/embeddings, models of `type: "embedding"`. */
export interface EmbeddingRequest {
  model: string;
  input: string[];
  dimensions?: number;
  user?: string;
  signal: ProviderSignal;
}

export interface EmbeddingResult {
  /** One vector per input, in input order. */
  vectors: number[][];
  /** Null when the provider reported none; the gateway then counts the input tokens itself. */
  usage: { promptTokens: number } | null;
}

export interface Provider {
  readonly name: string;
  readonly kind: ProviderKind;
  readonly region: string;
  /** Per hop: time to the response headers (and, for streams, the longest silence between chunks). */
  readonly timeoutMs: number;
  complete(req: ProviderRequest): Promise<Completion>;
  /** Resolves once the provider has accepted the request (HTTP 200); the parts follow as they arrive. */
  openStream(req: ProviderRequest): Promise<AsyncIterable<StreamPart>>;
  /** Kinds that serve embedding models. */
  embed?(req: EmbeddingRequest): Promise<EmbeddingResult>;
  /**
   * The request field (OpenAI name, e.g. `logit_bias`, `n`, `messages[2].content[0]`) this kind cannot carry, or null.
   * Optional: a kind without it carries everything.
   */
  unsupported?(req: Omit<ProviderRequest, 'signal'>): string | null;
  close(): Promise<void>;
}

/** The text of a message's content: a string as is, the text parts joined, '' for none. */
export function contentText(content: ChatMessage['content']): string {
  if (typeof content === 'string') return content;
  if (content === null) return '';
  let out = '';
  for (const part of content) if (part.type === 'text') out += part.text;
  return out;
}

/**
 * A failed provider call. `rejected` (the provider refused the request itself: 400, 413, 422) is the caller's problem
 * and is not retried elsewhere; every other kind is the provider's problem: the router falls back and the circuit
 * breaker counts it.
 */
export class ProviderError extends Error {
  constructor(
    readonly kind: 'status' | 'connection' | 'timeout' | 'protocol' | 'rejected',
    message: string,
    readonly status: number | null = null,
    /** A refusal's field (OpenAI name), when the provider's answer names one: the gateway's 400 names it as `param`. */
    readonly param: string | null = null,
  ) {
    super(message);
    this.name = 'ProviderError';
  }

  get retryable(): boolean {
    return this.kind !== 'rejected';
  }
}
