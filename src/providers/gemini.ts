import type { ProviderSpec, SecretValue } from './config-file.ts';
import { sseData } from './sse.ts';
import { argumentsObject, dataUrl, firstUnsupported, mergeTurns, newCallId, splitThoughtSignature, systemPrompt, withThoughtSignature } from './translate.ts';
import {
  contentText,
  ProviderError,
  type ChatMessage,
  type Choice,
  type Completion,
  type EmbeddingRequest,
  type EmbeddingResult,
  type Provider,
  type ProviderRequest,
  type ProviderUsage,
  type StreamPart,
  type ToolCall,
  usageParts,
} from './types.ts';
import { basePath, jsonEvent, parseJson, Upstream, type StreamTranslator } from './upstream.ts';

type Req = Omit<ProviderRequest, 'signal'>;
type Part = Record<string, unknown>;
interface Content {
  role: 'user' | 'model';
  parts: Part[];
}

const FILTERED = new Set(['SAFETY', 'RECITATION', 'BLOCKLIST', 'PROHIBITED_CONTENT', 'SPII', 'IMAGE_SAFETY']);

/** Gemini's finishReason as OpenAI's finish_reason; a candidate that called functions finished with tool_calls. */
export function geminiFinish(reason: unknown, calledTools: boolean): string {
  if (reason === 'MAX_TOKENS') return 'length';
  if (typeof reason === 'string' && FILTERED.has(reason)) return 'content_filter';
  return calledTools ? 'tool_calls' : 'stop';
}

function usageOf(u: any): ProviderUsage | null {
  if (typeof u?.promptTokenCount !== 'number') return null;
  // Thinking tokens (thoughtsTokenCount, apart from candidatesTokenCount) are billed as output, as Google bills them;
  // promptTokenCount already counts the cached part (cachedContentTokenCount) and the tool-use prompt.
  const thoughts = Number(u.thoughtsTokenCount) || 0;
  const completion = (Number(u.candidatesTokenCount) || 0) + thoughts;
  const prompt = u.promptTokenCount + (Number(u.toolUsePromptTokenCount) || 0);
  return { promptTokens: prompt, completionTokens: completion, ...usageParts(u.cachedContentTokenCount, null, thoughts) };
}

/** The tool message's answer as the object functionResponse.response must be: a JSON object as is, else {content}. */
function functionResponse(m: ChatMessage): Record<string, unknown> {
  const text = contentText(m.content);
  const parsed = parseJson(text);
  return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : { content: text };
}

/**
 * What Gemini takes in place of a thought signature for a function call it did not make (a history from another
 * provider, or a client that dropped the id's signature): its documented dummy value, which skips the validation.
 */
export const SKIP_THOUGHT_SIGNATURE = 'skip_thought_signature_validator';

/**
 * reasoning_effort as thinkingConfig: Gemini 3 and later take a thinkingLevel (minimal, low, medium, high), earlier
 * models a thinkingBudget in tokens (minimal 512, low 1,024, medium 8,192, high 24,576: the budgets Google's OpenAI
 * compatibility uses, minimal within every 2.5 model's range).
 */
export function thinkingConfigOf(model: string, effort: NonNullable<Req['options']>['reasoning_effort']): Record<string, unknown> | undefined {
  if (effort === undefined) return undefined;
  const major = Number(/gemini-(\d+)/.exec(model)?.[1] ?? 0);
  if (major >= 3) return { thinkingLevel: effort };
  return { thinkingBudget: { minimal: 512, low: 1024, medium: 8192, high: 24576 }[effort] };
}

/** The generateContent request body. */
export function toGemini(req: Req): Record<string, unknown> {
  const callNames = new Map<string, string>();
  const contents: Content[] = [];
  for (const m of req.messages) {
    if (m.role === 'system' || m.role === 'developer') continue;
    if (m.role === 'user') {
      const parts: Part[] =
        typeof m.content === 'string'
          ? m.content === ''
            ? []
            : [{ text: m.content }]
          : (m.content ?? []).map((p) => {
              if (p.type === 'text') return { text: p.text };
              const data = dataUrl(p.image_url.url)!;
              return { inlineData: { mimeType: data.mediaType, data: data.data } };
            });
      contents.push({ role: 'user', parts });
    } else if (m.role === 'tool') {
      const name = callNames.get(m.tool_call_id ?? '') ?? '';
      const id = m.tool_call_id === undefined ? undefined : splitThoughtSignature(m.tool_call_id).id;
      contents.push({ role: 'user', parts: [{ functionResponse: { id, name, response: functionResponse(m) } }] });
    } else {
      const parts: Part[] = [];
      const text = contentText(m.content);
      if (text !== '') parts.push({ text });
      const calls = m.tool_calls ?? [];
      // The signature Gemini gave each call goes back on its part (it gives one to the first call of each step).
      const split = calls.map((call) => splitThoughtSignature(call.id));
      const signed = split.some((c) => c.signature !== undefined);
      calls.forEach((call, k) => {
        callNames.set(call.id, call.function.name);
        const { id, signature } = split[k]!;
        const part: Part = { functionCall: { id, name: call.function.name, args: argumentsObject(call.function.arguments) ?? {} } };
        if (signature !== undefined) part.thoughtSignature = signature;
        else if (k === 0 && !signed) part.thoughtSignature = SKIP_THOUGHT_SIGNATURE;
        parts.push(part);
      });
      contents.push({ role: 'model', parts });
    }
  }
  const o = req.options ?? {};
  const body: Record<string, unknown> = { contents: mergeTurns(contents, 'parts') };
  const system = systemPrompt(req.messages);
  if (system !== '') body.systemInstruction = { parts: [{ text: system }] };

  const gen: Record<string, unknown> = {};
  const s = req.sampling;
  if (s.temperature !== undefined) gen.temperature = s.temperature;
  if (s.top_p !== undefined) gen.topP = s.top_p;
  if (s.stop !== undefined) gen.stopSequences = typeof s.stop === 'string' ? [s.stop] : s.stop;
  if (s.seed !== undefined) gen.seed = s.seed;
  if (s.presence_penalty !== undefined) gen.presencePenalty = s.presence_penalty;
  if (s.frequency_penalty !== undefined) gen.frequencyPenalty = s.frequency_penalty;
  if (req.maxTokens !== undefined) gen.maxOutputTokens = req.maxTokens;
  if ((o.n ?? 1) > 1) gen.candidateCount = o.n;
  // top_k: from an Anthropic request's top_k, or a Gemini request's topK (both ride as ChatOptions.anthropic.fields).
  const topK = o.anthropic?.fields?.top_k;
  if (typeof topK === 'number') gen.topK = topK;
  const thinking = thinkingConfigOf(req.model, o.reasoning_effort);
  if (thinking) gen.thinkingConfig = thinking;
  const format = o.response_format;
  if (format?.type === 'json_object') gen.responseMimeType = 'application/json';
  if (format?.type === 'json_schema') {
    gen.responseMimeType = 'application/json';
    // responseJsonSchema takes JSON Schema as is (responseSchema only an OpenAPI subset).
    if (format.json_schema.schema) gen.responseJsonSchema = format.json_schema.schema;
  }
  if (Object.keys(gen).length > 0) body.generationConfig = gen;

  if (o.tools && o.tools.length > 0) {
    body.tools = [
      {
        functionDeclarations: o.tools.map((t) => ({
          name: t.function.name,
          ...(t.function.description !== undefined ? { description: t.function.description } : {}),
          ...(t.function.parameters !== undefined ? { parametersJsonSchema: t.function.parameters } : {}),
        })),
      },
    ];
    const choice = o.tool_choice;
    let config: Record<string, unknown> | undefined;
    if (choice === 'auto') config = { mode: 'AUTO' };
    else if (choice === 'required') config = { mode: 'ANY' };
    else if (choice === 'none') config = { mode: 'NONE' };
    else if (typeof choice === 'object') config = { mode: 'ANY', allowedFunctionNames: [choice.function.name] };
    if (config) body.toolConfig = { functionCallingConfig: config };
  }
  return body;
}

/** A functionCall part as a tool call, its thought signature carried in the id (translate.ts withThoughtSignature). */
function toolCallOf(part: any): ToolCall {
  const f = part.functionCall;
  const id = withThoughtSignature(typeof f.id === 'string' && f.id ? f.id : newCallId(), part.thoughtSignature);
  return { id, type: 'function', function: { name: String(f.name), arguments: JSON.stringify(f.args ?? {}) } };
}

function candidateOf(c: any): { content: string; toolCalls: ToolCall[]; finishReason: string } {
  let content = '';
  const toolCalls: ToolCall[] = [];
  for (const part of Array.isArray(c?.content?.parts) ? c.content.parts : []) {
    // Thought summaries (includeThoughts) are the model's notes, not its answer: no surface shows them.
    if (part?.thought === true) continue;
    if (typeof part?.text === 'string') content += part.text;
    else if (part?.functionCall) toolCalls.push(toolCallOf(part));
  }
  return { content, toolCalls, finishReason: geminiFinish(c?.finishReason, toolCalls.length > 0) };
}

/** A generateContent answer as a Completion (several candidates when n > 1). */
export function fromGemini(res: any, name: string, n: number): Completion {
  const candidates: any[] = Array.isArray(res?.candidates) ? [...res.candidates] : [];
  if (candidates.length === 0) {
    // The prompt itself was blocked: no candidate at all.
    if (res?.promptFeedback?.blockReason) return { content: '', finishReason: 'content_filter', usage: usageOf(res.usageMetadata) };
    throw new ProviderError('protocol', `${name}: the response has no candidates`);
  }
  candidates.sort((a, b) => (a?.index ?? 0) - (b?.index ?? 0));
  const choices: Choice[] = candidates.map((c, i) => {
    const one = candidateOf(c);
    return { index: i, content: one.content, finishReason: one.finishReason, ...(one.toolCalls.length > 0 ? { toolCalls: one.toolCalls } : {}) };
  });
  const first = choices[0]!;
  return {
    content: first.content ?? '',
    finishReason: first.finishReason,
    ...(first.toolCalls ? { toolCalls: first.toolCalls } : {}),
    ...(n > 1 ? { choices } : {}),
    usage: usageOf(res.usageMetadata),
  };
}

/**
 * streamGenerateContent?alt=sse: each event is a partial GenerateContentResponse. Text parts become `delta`; a
 * functionCall comes whole, as one `tool_call` part; finishReason becomes `finish` per candidate; usageMetadata is
 * cumulative, so the last one is the usage, given at the end.
 */
export class GeminiStream implements StreamTranslator<string> {
  private readonly calls = new Map<number, number>();
  private readonly finished = new Set<number>();
  private usage: ProviderUsage | null = null;

  constructor(private readonly name: string) {}

  *push(data: string): Iterable<StreamPart> {
    const ev = jsonEvent(data, this.name);
    if (ev?.error) throw new ProviderError('status', `${this.name}: error in stream: ${String(ev.error.message ?? ev.error.status ?? 'unknown')}`);
    const usage = usageOf(ev?.usageMetadata);
    if (usage) this.usage = usage;
    const candidates: any[] = Array.isArray(ev?.candidates) ? ev.candidates : [];
    if (candidates.length === 0 && ev?.promptFeedback?.blockReason && !this.finished.has(0)) {
      this.finished.add(0);
      yield { type: 'finish', finishReason: 'content_filter' };
    }
    for (const c of candidates) {
      const choice = typeof c?.index === 'number' ? c.index : 0;
      const at = choice === 0 ? {} : { choice };
      for (const part of Array.isArray(c?.content?.parts) ? c.content.parts : []) {
        if (part?.thought === true) continue;
        if (typeof part?.text === 'string' && part.text !== '') yield { type: 'delta', content: part.text, ...at };
        else if (part?.functionCall) {
          const index = this.calls.get(choice) ?? 0;
          this.calls.set(choice, index + 1);
          const call = toolCallOf(part);
          yield { type: 'tool_call', index, id: call.id, name: call.function.name, arguments: call.function.arguments, ...at };
        }
      }
      if (c?.finishReason && !this.finished.has(choice)) {
        this.finished.add(choice);
        yield { type: 'finish', finishReason: geminiFinish(c.finishReason, (this.calls.get(choice) ?? 0) > 0), ...at };
      }
    }
  }

  *end(): Iterable<StreamPart> {
    if (this.finished.size === 0) throw new ProviderError('protocol', `${this.name}: the stream ended without a finishReason`);
    if (this.usage) yield { type: 'usage', usage: this.usage };
  }
}

/**
 * Kind `gemini`: the Gemini API (`POST <base_url>/models/{model}:generateContent`, `:streamGenerateContent?alt=sse`,
 * `:batchEmbedContents`; default base_url https://generativelanguage.googleapis.com/v1beta), the key in the
 * `x-goog-api-key` header or, with `api_key_in: query`, the `key` query parameter.
 */
export class GeminiProvider implements Provider {
  readonly kind = 'gemini' as const;
  readonly name: string;
  readonly region: string;
  readonly timeoutMs: number;
  private readonly http: Upstream;
  private readonly base: string;
  private readonly apiKey: SecretValue | null;
  private readonly keyInQuery: boolean;

  constructor(spec: ProviderSpec) {
    this.name = spec.name;
    this.region = spec.region;
    this.timeoutMs = spec.timeoutMs;
    this.apiKey = spec.apiKey;
    this.keyInQuery = spec.apiKeyIn === 'query';
    this.base = basePath(spec.baseUrl!);
    // Gemini answers 400 (not 401) for a key it does not know: the provider's problem, so fall back.
    const badKey = (status: number, body: string) => (status === 400 && body.includes('API_KEY_INVALID') ? 'status' : null);
    this.http = new Upstream(spec.name, new URL(spec.baseUrl!).origin, spec.timeoutMs, () => (this.apiKey ? [this.apiKey.reveal()] : []), badKey);
  }

  unsupported(req: Req): string | null {
    return firstUnsupported(req, { n: true, seed: true, penalties: true, reasoningEffort: true, imageUrl: (url) => dataUrl(url) !== null });
  }

  async complete(req: ProviderRequest): Promise<Completion> {
    const { path, headers, body } = this.request(req, 'generateContent', toGemini(req));
    return fromGemini(await this.http.postJson(path, headers, body, req.signal), this.name, req.options?.n ?? 1);
  }

  async openStream(req: ProviderRequest): Promise<AsyncIterable<StreamPart>> {
    const { path, headers, body } = this.request(req, 'streamGenerateContent', toGemini(req), true);
    const res = await this.http.post(path, headers, body, req.signal);
    return this.http.stream(res, req.signal, sseData, new GeminiStream(this.name));
  }

  async embed(req: EmbeddingRequest): Promise<EmbeddingResult> {
    const model = this.modelPath(req.model);
    const body = {
      requests: req.input.map((text) => ({
        model,
        content: { parts: [{ text }] },
        ...(req.dimensions !== undefined ? { outputDimensionality: req.dimensions } : {}),
      })),
    };
    const call = this.request(req, 'batchEmbedContents', body);
    const parsed = await this.http.postJson(call.path, call.headers, call.body, req.signal);
    const vectors = Array.isArray(parsed?.embeddings) ? parsed.embeddings.map((e: any) => e?.values) : [];
    if (vectors.length !== req.input.length || !vectors.every((v: unknown) => Array.isArray(v) && v.every((x) => typeof x === 'number'))) {
      throw new ProviderError('protocol', `${this.name}: the response has no embeddings[].values for every input`);
    }
    // batchEmbedContents reports no usage: the gateway counts the input tokens itself.
    return { vectors, usage: null };
  }

  /** `models/{model}` (a model id already starting with models/ or tunedModels/ as is). */
  private modelPath(model: string): string {
    return /^(models|tunedModels)\//.test(model) ? model : `models/${model}`;
  }

  private request(req: { model: string } & Partial<Req>, method: string, body: unknown, stream = false) {
    if (req.messages) {
      const field = this.unsupported(req as Req);
      if (field) throw new ProviderError('rejected', `${this.name}: kind gemini cannot carry ${field}`, 400);
    }
    const query = new URLSearchParams();
    if (stream) query.set('alt', 'sse');
    if (this.apiKey && this.keyInQuery) query.set('key', this.apiKey.reveal());
    const qs = query.toString();
    const path = `${this.base}/${this.modelPath(req.model)}:${method}${qs ? `?${qs}` : ''}`;
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: stream ? 'text/event-stream' : 'application/json' };
    if (this.apiKey && !this.keyInQuery) headers['x-goog-api-key'] = this.apiKey.reveal();
    return { path, headers, body: JSON.stringify(body) };
  }

  close(): Promise<void> {
    return this.http.close();
  }
}
