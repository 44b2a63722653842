import type { ProviderSpec } from './config-file.ts';
import {
  contentText,
  ProviderError,
  type ChatMessage,
  type ChatOptions,
  type Choice,
  type Completion,
  type EmbeddingRequest,
  type EmbeddingResult,
  type Provider,
  type ProviderRequest,
  type ProviderSignal,
  type StreamPart,
  type ToolCall,
} from './types.ts';

/** About four characters a token; deterministic, and cheap enough for the hot path. */
export const approxTokens = (text: string): number => (text.length === 0 ? 0 : Math.ceil(text.length / 4));

/** The mock's embedding models have this many dimensions (CONTRACT §9: mock-embed-1, 256). */
export const MOCK_EMBEDDING_DIMENSIONS = 256;

/** FNV-1a, 32 bits: a small deterministic hash for ids and embedding features. */
function fnv(text: string, seed = 0x811c9dc5): number {
  let h = seed >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/**
 * A value valid against a JSON Schema, deterministically: required properties (every property when the schema lists
 * none required), one array item (or minItems), the first enum value or const, the first non-null branch of a union,
 * `$ref`s into the same document, strings named after their property and fitted to minLength/maxLength and common
 * formats, numbers 1 (or the nearest bound).
 */
export function sampleJson(schema: unknown, root: unknown = schema, key?: string, depth = 0): unknown {
  if (typeof schema !== 'object' || schema === null || depth > 12) return schema === false ? null : (key ?? 'value');
  const s = schema as Record<string, any>;
  if (typeof s.$ref === 'string' && s.$ref.startsWith('#')) {
    const target = s.$ref
      .slice(1)
      .split('/')
      .filter(Boolean)
      .reduce((node: any, seg: string) => node?.[seg.replace(/~1/g, '/').replace(/~0/g, '~')], root);
    return sampleJson(target, root, key, depth + 1);
  }
  if ('const' in s) return s.const;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0];
  const union = (s.anyOf ?? s.oneOf) as unknown[] | undefined;
  if (Array.isArray(union) && union.length > 0) {
    const branch = union.find((b: any) => b?.type !== 'null') ?? union[0];
    return sampleJson(branch, root, key, depth + 1);
  }
  if (Array.isArray(s.allOf) && s.allOf.length > 0) {
    const parts = s.allOf.map((b: unknown) => sampleJson(b, root, key, depth + 1));
    return parts.every((p: unknown) => typeof p === 'object' && p !== null && !Array.isArray(p)) ? Object.assign({}, ...parts) : parts[0];
  }
  let type = s.type;
  if (Array.isArray(type)) type = type.find((t) => t !== 'null') ?? type[0];
  if (type === undefined) type = s.properties ? 'object' : s.items ? 'array' : 'string';
  switch (type) {
    case 'object': {
      const props = (s.properties ?? {}) as Record<string, unknown>;
      const keys: string[] = Array.isArray(s.required) ? s.required : Object.keys(props);
      const out: Record<string, unknown> = {};
      for (const k of keys) out[k] = sampleJson(props[k] ?? {}, root, k, depth + 1);
      return out;
    }
    case 'array': {
      const count = Math.min(Math.max(s.minItems ?? 1, 0), s.maxItems ?? Number.MAX_SAFE_INTEGER);
      const prefix = (s.prefixItems ?? []) as unknown[];
      return Array.from({ length: Math.max(count, prefix.length) }, (_, i) =>
        sampleJson(prefix[i] ?? s.items ?? {}, root, key, depth + 1),
      );
    }
    case 'integer':
    case 'number': {
      let n = 1;
      if (typeof s.minimum === 'number' && n < s.minimum) n = s.minimum;
      if (typeof s.exclusiveMinimum === 'number' && n <= s.exclusiveMinimum) n = s.exclusiveMinimum + 1;
      if (typeof s.maximum === 'number' && n > s.maximum) n = s.maximum;
      if (typeof s.exclusiveMaximum === 'number' && n >= s.exclusiveMaximum) n = s.exclusiveMaximum - 1;
      return type === 'integer' ? Math.ceil(n) : n;
    }
    case 'boolean':
      return true;
    case 'null':
      return null;
    default: {
      const formats: Record<string, string> = {
        'date-time': '2024-01-01T00:00:00Z',
        date: '2024-01-01',
        time: '00:00:00Z',
        email: 'user@example.com',
        uri: 'https://example.com/',
        url: 'https://example.com/',
        uuid: '00000000-0000-4000-8000-000000000000',
        ipv4: '192.0.2.1',
      };
      let text = formats[s.format as string] ?? key ?? 'text';
      if (typeof s.minLength === 'number' && text.length < s.minLength) text = text.padEnd(s.minLength, 'x');
      if (typeof s.maxLength === 'number' && text.length > s.maxLength) text = text.slice(0, s.maxLength);
      return text;
    }
  }
}

export interface MockAnswer {
  content: string;
  finishReason: string;
  toolCalls?: ToolCall[];
}

/**
 * A call the mock is told to recognise, and its answer instead of the echo: an evaluation's llm_judge call
 * (domain/evals/judge.ts), wired by the composition root (RouterOptions.mockScript), so the mock knows no domain.
 * Only a call whose first message is a system message starting with `marker` is handed to `answer` (null: the echo).
 */
export interface MockScript {
  marker: string;
  answer(messages: ChatMessage[]): string | null;
}

function scriptedAnswer(script: MockScript | undefined, messages: ChatMessage[]): string | null {
  const first = messages[0];
  if (!script || first?.role !== 'system' || !contentText(first.content).startsWith(script.marker)) return null;
  return script.answer(messages);
}

const lastOf = (messages: ChatMessage[], role: ChatMessage['role']) => {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]!.role === role) return messages[i]!;
  return undefined;
};

const INVALID_JSON = /\[mock:(bad|wrong)_json(?:=(\d+))?\]/;

/**
 * Tests ask the mock for a JSON answer that fails (structured output, CONTRACT §11) by a marker in a message:
 * `[mock:bad_json]` (not JSON at all) or `[mock:wrong_json]` (JSON that does not match), always; with `=N` only the
 * first N answers fail: an answer's number is the assistant messages after the marker (the gateway's re-asks append one).
 */
function invalidJsonAsked(messages: ChatMessage[]): 'bad' | 'wrong' | null {
  for (let i = 0; i < messages.length; i++) {
    const found = INVALID_JSON.exec(contentText(messages[i]!.content));
    if (!found) continue;
    if (found[2] === undefined) return found[1] as 'bad' | 'wrong';
    const answered = messages.slice(i + 1).filter((m) => m.role === 'assistant').length;
    return answered < Number(found[2]) ? (found[1] as 'bad' | 'wrong') : null;
  }
  return null;
}

/**
 * What the mock answers (kind `mock`, and the tests' OpenAI-wire server), deterministically:
 * - with tools (tool_choice not "none") and a user message last, or tool_choice "required" or naming a tool: one call
 *   of the named (else the first) tool, its arguments sampled from the tool's parameters schema (sampleJson);
 * - after a tool message: the tool's output as text;
 * - response_format json_schema: JSON sampled from the schema; json_object: `{"answer": <the echo>}`; invalid JSON
 *   on demand (invalidJsonAsked);
 * - otherwise the last user message's text (an echo), cut to max_tokens × 4 characters (finish_reason "length").
 */
export function mockAnswer(messages: ChatMessage[], maxTokens: number | undefined, options: ChatOptions | undefined, script?: MockScript): MockAnswer {
  const last = messages[messages.length - 1];
  const choice = options?.tool_choice;
  const tools = options?.tools;
  if (tools && tools.length > 0 && choice !== 'none') {
    const named = typeof choice === 'object' ? tools.find((t) => t.function.name === choice.function.name) : undefined;
    if (named || choice === 'required' || last?.role === 'user') {
      const tool = named ?? tools[0]!;
      const args = JSON.stringify(sampleJson(tool.function.parameters ?? { type: 'object', properties: {} }) ?? {});
      const id = `call_${fnv(`${tool.function.name}:${messages.length}`).toString(36)}`;
      return { content: '', finishReason: 'tool_calls', toolCalls: [{ id, type: 'function', function: { name: tool.function.name, arguments: args } }] };
    }
  }
  let text = last?.role === 'tool' ? contentText(last.content) : contentText(lastOf(messages, 'user')?.content ?? null);
  // A call the mock was told to recognise (an evaluation's judge): its scripted answer instead of the echo.
  const scripted = scriptedAnswer(script, messages);
  if (scripted != null) text = scripted;
  const format = options?.response_format;
  const broken = format && format.type !== 'text' ? invalidJsonAsked(messages) : null;
  if (broken === 'bad') text = 'not json {';
  else if (broken === 'wrong') {
    // Valid JSON that fails the format: the sample with every property null, or a list instead of an object.
    const sample = format?.type === 'json_schema' ? sampleJson(format.json_schema.schema ?? { type: 'object', properties: {} }) : null;
    text = JSON.stringify(sample !== null && typeof sample === 'object' && !Array.isArray(sample) ? Object.fromEntries(Object.keys(sample).map((k) => [k, null])) : []);
  } else if (format?.type === 'json_schema') text = JSON.stringify(sampleJson(format.json_schema.schema ?? { type: 'object', properties: {} }));
  else if (format?.type === 'json_object') text = JSON.stringify({ answer: text });
  if (maxTokens !== undefined && text.length > maxTokens * 4) return { content: text.slice(0, maxTokens * 4), finishReason: 'length' };
  return { content: text, finishReason: 'stop' };
}

/** The answer's pieces, word by word keeping the spaces, so that they join back to the whole answer. */
export const pieces = (text: string): string[] => text.match(/\S+\s*|\s+/g) ?? [];

/** OpenAI's logprobs object for a text: each piece a token of probability 1. */
export function mockLogprobs(text: string, top: number | undefined): { content: unknown[]; refusal: null } {
  return {
    content: pieces(text).map((token) => {
      const entry = { token, logprob: 0, bytes: [...Buffer.from(token, 'utf8')] };
      return { ...entry, top_logprobs: top ? [entry] : [] };
    }),
    refusal: null,
  };
}

/**
 * A deterministic unit vector for a text (hashed features: its words with weight 1, their character trigrams with
 * weight 0.5, each at a hashed index with a hashed sign), so that texts sharing words are closer than unrelated ones.
 * `dimensions` below 256 keep the first ones, renormalised (as OpenAI's shortened embeddings).
 */
export function mockEmbedding(text: string, dimensions = MOCK_EMBEDDING_DIMENSIONS): number[] {
  const v = new Array<number>(MOCK_EMBEDDING_DIMENSIONS).fill(0);
  const add = (feature: string, weight: number) => {
    const h = fnv(feature);
    v[h % MOCK_EMBEDDING_DIMENSIONS]! += (h & 0x80000000 ? -1 : 1) * weight;
  };
  const words = text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [text];
  for (const w of words) {
    add(`w:${w}`, 1);
    const padded = `^${w}$`;
    for (let i = 0; i + 3 <= padded.length; i++) add(`t:${padded.slice(i, i + 3)}`, 0.5);
  }
  const out = v.slice(0, dimensions);
  const norm = Math.hypot(...out) || 1;
  return out.map((x) => x / norm);
}

const promptTokens = (messages: ChatMessage[]) => messages.reduce((n, m) => n + 1 + approxTokens(contentText(m.content)), 0);
const completionTokens = (a: MockAnswer) =>
  approxTokens(a.content) + (a.toolCalls ?? []).reduce((n, c) => n + approxTokens(c.function.name + c.function.arguments), 0);

function abortError(signal: ProviderSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new DOMException('The operation was aborted.', 'AbortError');
}

/**
 * Kind `mock`, built in, in process, with no network: answers as `mockAnswer` says (an echo of the last user message
 * by default; tool calls and JSON when the request asks for them), `n` identical choices, logprobs when asked, and
 * embeddings (`mockEmbedding`). The default provider when SVC_PROVIDERS_FILE is unset.
 */
export class MockProvider implements Provider {
  readonly kind = 'mock' as const;
  readonly name: string;
  readonly region: string;
  readonly timeoutMs: number;

  constructor(spec: ProviderSpec, private readonly script?: MockScript) {
    this.name = spec.name;
    this.region = spec.region;
    this.timeoutMs = spec.timeoutMs;
  }

  async complete(req: ProviderRequest): Promise<Completion> {
    if (req.signal.aborted) throw abortError(req.signal);
    const a = mockAnswer(req.messages, req.maxTokens, req.options, this.script);
    const n = req.options?.n ?? 1;
    const logprobs = req.options?.logprobs ? mockLogprobs(a.content, req.options.top_logprobs) : undefined;
    const completion: Completion = {
      content: a.content,
      finishReason: a.finishReason,
      usage: { promptTokens: promptTokens(req.messages), completionTokens: completionTokens(a) * n },
    };
    if (a.toolCalls) completion.toolCalls = a.toolCalls;
    if (logprobs) completion.logprobs = logprobs;
    if (n > 1) {
      completion.choices = Array.from({ length: n }, (_, index): Choice => ({
        index,
        content: a.toolCalls && a.content === '' ? null : a.content,
        finishReason: a.finishReason,
        ...(a.toolCalls ? { toolCalls: a.toolCalls } : {}),
        ...(logprobs ? { logprobs } : {}),
      }));
    }
    return completion;
  }

  async openStream(req: ProviderRequest): Promise<AsyncIterable<StreamPart>> {
    if (req.signal.aborted) throw abortError(req.signal);
    const a = mockAnswer(req.messages, req.maxTokens, req.options, this.script);
    const signal = req.signal;
    const prompt = promptTokens(req.messages);
    const n = req.options?.n ?? 1;
    const withLogprobs = req.options?.logprobs === true;
    const top = req.options?.top_logprobs;
    return (async function* () {
      for (let choice = 0; choice < n; choice++) {
        const at = choice === 0 ? {} : { choice };
        for (const piece of pieces(a.content)) {
          if (signal.aborted) throw abortError(signal);
          yield { type: 'delta', content: piece, ...at } as StreamPart;
          if (withLogprobs) yield { type: 'logprobs', logprobs: mockLogprobs(piece, top), ...at } as StreamPart;
        }
        for (const [index, call] of (a.toolCalls ?? []).entries()) {
          // The id and name first, then the arguments in two pieces, as OpenAI streams them.
          const args = call.function.arguments;
          const half = Math.ceil(args.length / 2);
          yield { type: 'tool_call', index, id: call.id, name: call.function.name, arguments: '', ...at } as StreamPart;
          yield { type: 'tool_call', index, arguments: args.slice(0, half), ...at } as StreamPart;
          yield { type: 'tool_call', index, arguments: args.slice(half), ...at } as StreamPart;
        }
        yield { type: 'finish', finishReason: a.finishReason, ...at } as StreamPart;
      }
      yield { type: 'usage', usage: { promptTokens: prompt, completionTokens: completionTokens(a) * n } };
    })();
  }

  async embed(req: EmbeddingRequest): Promise<EmbeddingResult> {
    if (req.signal.aborted) throw abortError(req.signal);
    const dims = req.dimensions ?? MOCK_EMBEDDING_DIMENSIONS;
    if (dims > MOCK_EMBEDDING_DIMENSIONS) {
      throw new ProviderError('rejected', `${this.name}: dimensions must be at most ${MOCK_EMBEDDING_DIMENSIONS} for ${req.model}`);
    }
    return {
      vectors: req.input.map((text) => mockEmbedding(text, dims)),
      usage: { promptTokens: req.input.reduce((n, text) => n + approxTokens(text), 0) },
    };
  }

  async close(): Promise<void> {}
}
