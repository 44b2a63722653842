import type { Route } from '../../providers/router.ts';
import type { AnthropicExtras, ChatMessage, ChatOptions, Choice, Completion, ProviderUsage, Sampling, ThinkingBlock, ToolCall } from '../../providers/types.ts';
import type { SvcError } from '../../errors/svc-error.ts';
import type { Citation } from '../rag/stage.ts';
import type { RetainedResult } from '../privacy/stage.ts';
import type { PiiCounts } from '../privacy/pii.ts';
import type { AppliedTemplate } from '../templates/inference-stage.ts';
import type { CachedAnswer } from './cache.ts';
import type { InferenceRequest } from './schema.ts';
import type { OutputCheck } from './stages/structured-output.ts';

/**
 * The inference pipeline's shared types. The steps: validate.ts (the request by itself, and begin: template,
 * validation, project, customer, rag) -> admit.ts (plan: project state, residency, routes, cache key; admit: budget,
 * cache lookup, token reservation) -> call.ts (createInference) or stream.ts (streamInference) -> account.ts (tokens,
 * spend, cache store, the outcome); embeddings.ts runs the same steps for /v1/embeddings; tracker.ts follows one
 * inference to its usage record. service.ts is the public entry.
 */

/** CONTRACT §8/§9's request: OpenAI's chat-completions request plus the svc fields (schema.ts). */
export type InferenceInput = InferenceRequest;

/** `off`: caching not asked for; `unavailable`: asked for, but the store did not answer (the request went on uncached). */
export type CacheStatus = 'off' | 'hit' | 'miss' | 'unavailable';

/** The answer: what its retained record keeps (RetainedResult), and more. */
export interface InferenceResult extends RetainedResult {
  cacheStatus: CacheStatus;
  /** Choice 0's tool calls, when the model called tools. */
  toolCalls?: ToolCall[];
  /** The anthropic kind's thinking blocks (only the /v1/messages surface asks for thinking and shows it). */
  thinking?: ThinkingBlock[];
  /** Choice 0's logprobs, as the provider gave them, when asked for. */
  logprobs?: unknown;
  /** Every choice, when the request asked for n > 1. */
  choices?: Choice[];
  /** The `rag` option's sources (CONTRACT §13), when asked for. */
  citations?: Citation[];
  /** CONTRACT §11: what PII redaction replaced, when it ran. */
  pii?: { redacted: PiiCounts };
  /** The prompt template the request used (CONTRACT §10). */
  template?: AppliedTemplate;
  /** With a JSON response_format: how many answers it took (CONTRACT §11). */
  attempts?: number;
  /** What the provider said of its tokens beyond the two totals (prompt-cache reads and writes, reasoning), when it did. */
  tokenDetails?: TokenDetails;
}

/** Parts of promptTokens (cache reads, cache writes) and of completionTokens (reasoning), as the provider reported them. */
export type TokenDetails = Pick<ProviderUsage, 'cacheReadTokens' | 'cacheWriteTokens' | 'reasoningTokens'>;

export type StreamEvent =
  | { type: 'delta'; content: string; choice?: number }
  | { type: 'tool_call'; index: number; id?: string; name?: string; arguments: string; choice?: number }
  | { type: 'logprobs'; logprobs: unknown; choice?: number }
  | { type: 'done'; result: InferenceResult }
  | { type: 'error'; error: SvcError };

/**
 * A piece of thinking block `index` (the anthropic kind's thinking). Only a request of the /v1/messages surface
 * (Validated.options.anthropic set) gets these among its StreamEvents: the other surfaces' formats never see one.
 */
export type ThinkingEvent = { type: 'thinking'; index: number; thinking?: string; signature?: string; redacted?: string };

export interface InferenceStream {
  /** What is known before the first token: enough for response headers and a first SSE event. */
  head: Omit<InferenceResult, 'content' | 'finishReason' | 'promptTokens' | 'completionTokens' | 'costMicros'>;
  /** Deltas, then one `done` (or `error`). Accounting runs however it ends, the consumer stopping early included. */
  events: AsyncGenerator<StreamEvent>;
}

/** How a surface addresses the project: /v1/inference needs project_id (or X-Svc-Project); the OpenAI surface
 *  defaults to the key's own project. */
export interface InferenceSurface {
  projectFromKey?: boolean;
  /** POST /v1/messages: what the Anthropic request carries beyond the chat request (ChatOptions.anthropic). */
  anthropic?: AnthropicExtras;
}

export interface Validated {
  /** Chat routes may refuse fields (Provider.unsupported); embedding routes serve /v1/embeddings only. */
  kind: 'chat' | 'embedding';
  model: string;
  messages: ChatMessage[];
  maxTokens: number | undefined;
  sampling: Sampling;
  /** The rest of the chat-completions request; undefined for a plain request. */
  options: ChatOptions | undefined;
  /** Tokens the messages' text does not show (tool definitions, tool-call arguments, images, a response schema,
   *  the completions of n > 1): added to the reservation and to a count the provider did not report. */
  extraTokens: number;
  /** null: not asked (the routing policy may still cache); 0: never; else a TTL in seconds. */
  cacheTtlS: number | null;
  region: string | null;
  /** CONTRACT §11: the request's pii option (domain/privacy). */
  pii?: InferenceRequest['pii'];
  /** The answer's check for a JSON response_format (stages/structured-output.ts); null: none asked. */
  output?: OutputCheck | null;
}

export interface Plan {
  routes: Route[];
  /** Region constraint: the project's pin, else the request's region, else none. */
  region: string | null;
  cache: { key: string; ttlS: number } | null;
  /** The project's monthly budget, from the project cache (the budget check needs no other read for it). */
  projectBudgetMicros: bigint | null;
}

export type Lookup = { status: CacheStatus; answer?: CachedAnswer };

/** What a provider answered, with its tokens (counted by the gateway when the provider reported none). */
export type Answer = Pick<Completion, 'content' | 'finishReason' | 'toolCalls' | 'logprobs' | 'choices' | 'thinking'> & { usage: ProviderUsage };
