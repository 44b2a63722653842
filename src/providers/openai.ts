import type { ProviderSpec, SecretValue } from './config-file.ts';
import { ChatChunkStream, usageOf } from './openai-wire.ts';
import { sseData } from './sse.ts';
import { withoutThoughtSignatures } from './translate.ts';
import { Upstream } from './upstream.ts';
import {
  ProviderError,
  type Choice,
  type Completion,
  type EmbeddingRequest,
  type EmbeddingResult,
  type Provider,
  type ProviderRequest,
  type StreamPart,
  type ToolCall,
} from './types.ts';

interface WireChoice {
  index?: unknown;
  message?: { content?: unknown; tool_calls?: unknown; refusal?: unknown };
  finish_reason?: unknown;
  logprobs?: unknown;
}

/** A choice's tool calls as given, when they have the documented shape (else none: the provider broke the format). */
function toolCallsOf(raw: unknown): ToolCall[] | undefined {
  if (!Array.isArray(raw) || raw.length === 0) return undefined;
  const calls: ToolCall[] = [];
  for (const c of raw as Array<{ id?: unknown; function?: { name?: unknown; arguments?: unknown } }>) {
    if (typeof c?.id !== 'string' || typeof c.function?.name !== 'string') continue;
    calls.push({ id: c.id, type: 'function', function: { name: c.function.name, arguments: typeof c.function.arguments === 'string' ? c.function.arguments : '' } });
  }
  return calls.length > 0 ? calls : undefined;
}

function choiceOf(c: WireChoice, index: number, provider: string): Choice {
  const content = c.message?.content;
  if (typeof content !== 'string' && content !== null && content !== undefined) {
    throw new ProviderError('protocol', `${provider}: choices[${index}].message.content is not text`);
  }
  const choice: Choice = { index, content: content ?? null, finishReason: typeof c.finish_reason === 'string' ? c.finish_reason : 'stop' };
  const toolCalls = toolCallsOf(c.message?.tool_calls);
  if (toolCalls) choice.toolCalls = toolCalls;
  if (c.logprobs !== undefined && c.logprobs !== null) choice.logprobs = c.logprobs;
  if (typeof c.message?.refusal === 'string') choice.refusal = c.message.refusal;
  return choice;
}

/**
 * Kind `openai`: the OpenAI chat-completions API (OpenAI, vLLM, Ollama, llama.cpp server, …) over the HTTP side every
 * kind shares (upstream.ts: one keep-alive undici Pool per provider, never global fetch; whole answers on the dispatch
 * API, streams through pool.request; statuses, transport errors and credential redaction as for every kind).
 */
export class OpenAIProvider implements Provider {
  readonly kind = 'openai' as const;
  readonly name: string;
  readonly region: string;
  readonly timeoutMs: number;
  private readonly http: Upstream;
  private readonly path: string;
  private readonly embeddingsPath: string;
  private readonly apiKey: SecretValue | null;

  constructor(spec: ProviderSpec) {
    this.name = spec.name;
    this.region = spec.region;
    this.timeoutMs = spec.timeoutMs;
    this.apiKey = spec.apiKey;
    const url = new URL(spec.baseUrl!);
    this.path = `${url.pathname.replace(/\/+$/, '')}/chat/completions`;
    this.embeddingsPath = `${url.pathname.replace(/\/+$/, '')}/embeddings`;
    this.http = new Upstream(spec.name, url.origin, spec.timeoutMs, () => (this.apiKey ? [this.apiKey.reveal()] : []));
  }

  async complete(req: ProviderRequest): Promise<Completion> {
    const parsed: { choices?: WireChoice[]; usage?: unknown } = await this.http.postJson(
      this.path,
      this.headers(false),
      JSON.stringify(this.payload(req, false)),
      req.signal,
    );
    const wire = parsed.choices;
    const first = wire?.[0];
    if (!first || (first.message?.content === undefined && first.message?.tool_calls === undefined)) {
      throw new ProviderError('protocol', `${this.name}: the response has no choices[0].message.content`);
    }
    const choice = choiceOf(first, 0, this.name);
    const completion: Completion = { content: choice.content ?? '', finishReason: choice.finishReason, usage: usageOf(parsed.usage) };
    if (choice.toolCalls) completion.toolCalls = choice.toolCalls;
    if (choice.logprobs !== undefined) completion.logprobs = choice.logprobs;
    if (wire.length > 1) completion.choices = wire.map((c, i) => choiceOf(c, typeof c.index === 'number' ? c.index : i, this.name));
    return completion;
  }

  async openStream(req: ProviderRequest): Promise<AsyncIterable<StreamPart>> {
    const res = await this.http.post(this.path, this.headers(true), JSON.stringify(this.payload(req, true)), req.signal);
    // Chat-completion chunks, every choice, as for azure_openai (openai-wire.ts).
    return this.http.stream(res, req.signal, sseData, new ChatChunkStream(this.name, (t) => this.http.redact(t)));
  }

  /** POST <base>/embeddings, floats (the gateway encodes base64 itself when its client asks). */
  async embed(req: EmbeddingRequest): Promise<EmbeddingResult> {
    const payload: Record<string, unknown> = { model: req.model, input: req.input, encoding_format: 'float' };
    if (req.dimensions !== undefined) payload.dimensions = req.dimensions;
    if (req.user !== undefined) payload.user = req.user;
    const parsed: { data?: Array<{ index?: unknown; embedding?: unknown }>; usage?: { prompt_tokens?: unknown } } = await this.http.postJson(
      this.embeddingsPath,
      this.headers(false),
      JSON.stringify(payload),
      req.signal,
    );
    const data = parsed.data;
    if (!Array.isArray(data) || data.length !== req.input.length) {
      throw new ProviderError('protocol', `${this.name}: the response does not hold one embedding per input`);
    }
    const vectors: number[][] = new Array(data.length);
    data.forEach((d, i) => {
      const at = typeof d.index === 'number' ? d.index : i;
      if (!Array.isArray(d.embedding) || !d.embedding.every((x) => typeof x === 'number') || vectors[at] !== undefined || at >= data.length) {
        throw new ProviderError('protocol', `${this.name}: data[${i}] is not an embedding of floats`);
      }
      vectors[at] = d.embedding as number[];
    });
    const p = parsed.usage?.prompt_tokens;
    return { vectors, usage: typeof p === 'number' && Number.isInteger(p) && p >= 0 ? { promptTokens: p } : null };
  }

  private payload(req: ProviderRequest, stream: boolean): Record<string, unknown> {
    return {
      model: req.model,
      // OpenAI caps a tool call id at 40 characters: Gemini's thought signatures stay out (translate.ts).
      messages: withoutThoughtSignatures(req.messages),
      ...req.sampling,
      ...(req.maxTokens !== undefined ? { max_tokens: req.maxTokens } : {}),
      // The rest of the chat-completions request, as the client gave it (CONTRACT §9); the /v1/messages surface's
      // Anthropic extras (ChatOptions.anthropic) never go on OpenAI's wire.
      ...(req.options?.anthropic ? { ...req.options, anthropic: undefined } : req.options),
      ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    };
  }

  private headers(stream: boolean): Record<string, string> {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: stream ? 'text/event-stream' : 'application/json',
    };
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey.reveal()}`;
    return headers;
  }

  close(): Promise<void> {
    return this.http.close();
  }
}
