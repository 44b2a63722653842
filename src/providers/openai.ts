import { Pool, errors as undiciErrors, type Dispatcher } from 'undici';
import type { ProviderSpec, SecretValue } from './config-file.ts';
import { sseData } from './sse.ts';
import { postWhole, type WholeAnswer } from './whole-answer.ts';
import {
  ProviderError,
  type Choice,
  type Completion,
  type EmbeddingRequest,
  type EmbeddingResult,
  type Provider,
  type ProviderRequest,
  type ProviderSignal,
  type ProviderUsage,
  type StreamPart,
  type ToolCall,
} from './types.ts';

/** Statuses that say the request itself is wrong: the same request would fail on every provider. */
const REJECTED = new Set([400, 413, 422]);

function usageOf(raw: unknown): ProviderUsage | null {
  if (typeof raw !== 'object' || raw === null) return null;
  const u = raw as Record<string, unknown>;
  const p = u.prompt_tokens;
  const c = u.completion_tokens;
  if (typeof p !== 'number' || typeof c !== 'number' || !Number.isInteger(p) || !Number.isInteger(c) || p < 0 || c < 0) {
    return null;
  }
  return { promptTokens: p, completionTokens: c };
}

/**
 * What a provider's error text may not pass on to the caller or the logs: the provider's own API key (a provider that
 * echoes the request), and anything shaped like a credential (`Bearer …`, `sk-…`, an svc secret).
 */
export function redactCredentials(text: string, apiKey: string | null): string {
  let out = apiKey ? text.split(apiKey).join('[redacted]') : text;
  out = out.replace(/\b(Bearer|Basic)\s+[^\s"',;]+/gi, '$1 [redacted]');
  out = out.replace(/\b(sk|svc_sk|whsec)[-_][A-Za-z0-9_-]{8,}/g, '[redacted]');
  return out;
}

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

function upstreamMessage(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } | string };
    const e = parsed.error;
    if (typeof e === 'string') return e.slice(0, 300);
    if (e && typeof e.message === 'string') return e.message.slice(0, 300);
  } catch {
    // not JSON
  }
  return body.slice(0, 300);
}

function abortReason(signal: ProviderSignal, err: unknown): unknown {
  return signal.aborted ? (signal.reason ?? err) : err;
}

/** undici's own errors: a deadline it enforced, or a connection that failed. */
export function transportError(err: unknown, provider: string): ProviderError {
  // A provider that does not answer in time. Not answering a connect (ConnectTimeoutError) is a connection error:
  // fallback and, when nothing else answers, 503 model_unavailable (CONTRACT §8), not 408.
  if (err instanceof undiciErrors.HeadersTimeoutError || err instanceof undiciErrors.BodyTimeoutError) {
    return new ProviderError('timeout', `${provider}: ${(err as Error).message}`);
  }
  return new ProviderError('connection', `${provider}: ${(err as Error).message ?? 'connection failed'}`);
}

/**
 * One POST through a keep-alive pool, sent again once when the connection it went out on was closed by the provider
 * before any answer ("other side closed": the provider's idle timeout ending just as the pool reused the connection).
 * Only that failure and only once, on a fresh connection; the body is text, so it is sent again as it was.
 */
export async function postThroughPool(pool: Pool, opts: Dispatcher.RequestOptions & { signal: ProviderSignal }): Promise<Dispatcher.ResponseData> {
  try {
    return await pool.request(opts);
  } catch (err) {
    if (!(err instanceof undiciErrors.SocketError) || opts.signal.aborted) throw err;
    return pool.request(opts);
  }
}

/**
 * Kind `openai`: the OpenAI chat-completions API (OpenAI, vLLM, Ollama, llama.cpp server, …) over one keep-alive undici
 * Pool per provider. Never global fetch: the pool bounds connections and reuses them across requests.
 */
export class OpenAIProvider implements Provider {
  readonly kind = 'openai' as const;
  readonly name: string;
  readonly region: string;
  readonly timeoutMs: number;
  private readonly pool: Pool;
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
    this.pool = new Pool(url.origin, {
      connections: 256,
      pipelining: 1,
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 600_000,
      // Backstops; the router's own per-hop and routing deadlines usually fire first.
      headersTimeout: spec.timeoutMs,
      bodyTimeout: spec.timeoutMs,
      connect: { timeout: Math.min(spec.timeoutMs, 10_000) },
    });
  }

  async complete(req: ProviderRequest): Promise<Completion> {
    const text = await this.postWhole(this.path, this.payload(req, false), req.signal);
    let parsed: { choices?: WireChoice[]; usage?: unknown };
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new ProviderError('protocol', `${this.name}: the response is not JSON`);
    }
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
    const res = await this.postForStream(this.payload(req, true), req.signal);
    const name = this.name;
    const apiKey = this.apiKey;
    const signal = req.signal;
    return (async function* () {
      try {
        for await (const data of sseData(res.body)) {
          if (data === '[DONE]') return;
          let chunk: {
            choices?: Array<{ index?: unknown; delta?: { content?: unknown; tool_calls?: unknown }; finish_reason?: unknown; logprobs?: unknown }>;
            usage?: unknown;
            error?: unknown;
          };
          try {
            chunk = JSON.parse(data);
          } catch {
            throw new ProviderError('protocol', `${name}: a stream event is not JSON`);
          }
          if (chunk.error) throw new ProviderError('status', `${name}: error in stream: ${upstreamMessage(redactCredentials(data, apiKey?.reveal() ?? null))}`);
          for (const choice of chunk.choices ?? []) {
            // Choice 0 carries no `choice` field: the plain stream's parts stay what they were.
            const at = typeof choice.index === 'number' && choice.index > 0 ? { choice: choice.index } : undefined;
            if (typeof choice.delta?.content === 'string' && choice.delta.content !== '') {
              yield (at ? { type: 'delta', content: choice.delta.content, ...at } : { type: 'delta', content: choice.delta.content }) as StreamPart;
            }
            if (Array.isArray(choice.delta?.tool_calls)) {
              for (const c of choice.delta.tool_calls as Array<{ index?: unknown; id?: unknown; function?: { name?: unknown; arguments?: unknown } }>) {
                yield {
                  type: 'tool_call',
                  index: typeof c.index === 'number' ? c.index : 0,
                  ...(typeof c.id === 'string' ? { id: c.id } : {}),
                  ...(typeof c.function?.name === 'string' ? { name: c.function.name } : {}),
                  arguments: typeof c.function?.arguments === 'string' ? c.function.arguments : '',
                  ...at,
                } as StreamPart;
              }
            }
            if (choice.logprobs !== undefined && choice.logprobs !== null) yield { type: 'logprobs', logprobs: choice.logprobs, ...at } as StreamPart;
            if (typeof choice.finish_reason === 'string') yield { type: 'finish', finishReason: choice.finish_reason, ...at } as StreamPart;
          }
          const usage = usageOf(chunk.usage);
          if (usage) yield { type: 'usage', usage };
        }
      } catch (err) {
        if (err instanceof ProviderError) throw err;
        throw abortReason(signal, transportError(err, name));
      } finally {
        // Stopped early (client gone): drop the upstream body so undici closes or frees the connection.
        if (!res.body.destroyed) res.body.destroy();
      }
    })();
  }

  /** POST <base>/embeddings, floats (the gateway encodes base64 itself when its client asks). */
  async embed(req: EmbeddingRequest): Promise<EmbeddingResult> {
    const payload: Record<string, unknown> = { model: req.model, input: req.input, encoding_format: 'float' };
    if (req.dimensions !== undefined) payload.dimensions = req.dimensions;
    if (req.user !== undefined) payload.user = req.user;
    const text = await this.postWhole(this.embeddingsPath, payload, req.signal);
    let parsed: { data?: Array<{ index?: unknown; embedding?: unknown }>; usage?: { prompt_tokens?: unknown } };
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new ProviderError('protocol', `${this.name}: the response is not JSON`);
    }
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
      messages: req.messages,
      ...req.sampling,
      ...(req.maxTokens !== undefined ? { max_tokens: req.maxTokens } : {}),
      // The rest of the chat-completions request, as the client gave it (CONTRACT §9).
      ...req.options,
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

  /** A streamed answer: the response with its body still to read (2xx only). */
  private async postForStream(payload: Record<string, unknown>, signal: ProviderSignal): Promise<Dispatcher.ResponseData> {
    let res: Dispatcher.ResponseData;
    try {
      res = await postThroughPool(this.pool, { method: 'POST', path: this.path, headers: this.headers(true), body: JSON.stringify(payload), signal });
    } catch (err) {
      throw abortReason(signal, transportError(err, this.name));
    }
    if (res.statusCode >= 200 && res.statusCode < 300) return res;
    throw this.statusError(res.statusCode, await res.body.text().catch(() => ''));
  }

  /** A whole answer's body text (2xx only; whole-answer.ts). */
  private async postWhole(path: string, payload: Record<string, unknown>, signal: ProviderSignal): Promise<string> {
    let answer: WholeAnswer;
    try {
      answer = await postWhole(this.pool, { path, headers: this.headers(false), body: JSON.stringify(payload), signal });
    } catch (err) {
      throw abortReason(signal, transportError(err, this.name));
    }
    if (answer.statusCode >= 200 && answer.statusCode < 300) return answer.text;
    throw this.statusError(answer.statusCode, answer.text);
  }

  private statusError(status: number, body: string): ProviderError {
    const detail = `${this.name} answered ${status}: ${upstreamMessage(redactCredentials(body, this.apiKey?.reveal() ?? null))}`;
    return new ProviderError(REJECTED.has(status) ? 'rejected' : 'status', detail, status);
  }

  async close(): Promise<void> {
    await this.pool.close().catch(() => this.pool.destroy());
  }
}
