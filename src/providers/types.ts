/** The one interface every model provider adapter implements (kind `openai`, kind `mock`). */

export type ChatRole = 'system' | 'user' | 'assistant';

export interface ChatMessage {
  role: ChatRole;
  content: string;
}

/** Sampling parameters passed through to the provider as given (OpenAI names). */
export interface Sampling {
  temperature?: number;
  top_p?: number;
  stop?: string | string[];
  seed?: number;
  presence_penalty?: number;
  frequency_penalty?: number;
}

export interface ProviderRequest {
  model: string;
  messages: ChatMessage[];
  maxTokens?: number;
  sampling: Sampling;
  /** Aborts the call (client gone, hop timeout, routing timeout); undici tears the upstream request down. */
  signal: AbortSignal;
}

export interface ProviderUsage {
  promptTokens: number;
  completionTokens: number;
}

export interface Completion {
  content: string;
  finishReason: string;
  /** Null when the provider reported none; the gateway then counts the tokens itself. */
  usage: ProviderUsage | null;
}

export type StreamPart =
  | { type: 'delta'; content: string }
  | { type: 'finish'; finishReason: string }
  | { type: 'usage'; usage: ProviderUsage };

export interface Provider {
  readonly name: string;
  readonly kind: 'openai' | 'mock';
  readonly region: string;
  /** Per hop: time to the response headers (and, for streams, the longest silence between chunks). */
  readonly timeoutMs: number;
  complete(req: ProviderRequest): Promise<Completion>;
  /** Resolves once the provider has accepted the request (HTTP 200); the parts follow as they arrive. */
  openStream(req: ProviderRequest): Promise<AsyncIterable<StreamPart>>;
  close(): Promise<void>;
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
  ) {
    super(message);
    this.name = 'ProviderError';
  }

  get retryable(): boolean {
    return this.kind !== 'rejected';
  }
}
