import { invalid, SvcError } from '../../../errors/svc-error.ts';
import { argumentsObject, dataUrl, splitThoughtSignature, withThoughtSignature } from '../../../providers/translate.ts';
import type { AnthropicExtras, ChatMessage, ContentPart, FunctionTool, ResponseFormat, ToolCall, ToolChoice } from '../../../providers/types.ts';
import { countPromptTokens } from '../../../limits/index.ts';
import type { Ctx } from '../../context.ts';
import type { InferencePorts } from '../ports.ts';
import type { EmbeddingsRequest, InferenceRequest } from '../schema.ts';
import type { InferenceResult } from '../types.ts';
import { validateInference } from '../validate.ts';
import type { BatchEmbedContentsRequest, CountTokensRequest, EmbedContentRequest, GeminiContent, GeminiPart, GenerateContentRequest } from './gemini-schema.ts';

/**
 * The Gemini API inbound (CONTRACT §19): a generateContent request as the gateway's internal request (OpenAI's
 * chat-completions shape, schema.ts), so that it runs on the same pipeline and through every provider kind, and the
 * answer back as a GenerateContentResponse. The gemini kind (providers/gemini.ts) translates the other way (internal
 * → Gemini wire, Gemini answer → internal); this is its mirror for the inbound side.
 *
 * Carried: contents (text, images as inlineData, functionCall, functionResponse), systemInstruction,
 * tools.functionDeclarations, toolConfig.functionCallingConfig, generationConfig (maxOutputTokens, temperature, topP,
 * stopSequences, candidateCount, seed, penalties, responseMimeType + responseSchema / responseJsonSchema,
 * responseLogprobs / logprobs, thinkingConfig, topK). A functionCall part's thoughtSignature rides in its tool call's
 * id (providers/translate.ts withThoughtSignature) and comes back on the part, so a Gemini 3 history round-trips; thought
 * parts (summaries) and the signatures of text parts are dropped. topK rides as the Anthropic extra top_k (the gemini
 * and anthropic kinds send it, the others refuse it). Refused with 400 naming the field: what no internal field
 * carries (safetySettings, cachedContent, non-image inlineData, function calling mode VALIDATED, other response MIME
 * types).
 * A field a provider kind cannot carry is refused by the pipeline under its internal name; `geminiError` renames it.
 */

/** Where each internal field came from, for errors: message index → its Gemini path, its parts', its calls'. */
export interface GeminiFields {
  messages: { path: string; content?: string[]; calls?: string[]; callId?: string }[];
  tools: string[];
  responseFormat: string;
}

export interface TranslatedRequest {
  request: InferenceRequest;
  fields: GeminiFields;
  /** generationConfig.topK, as the Anthropic extra top_k (the gemini and anthropic kinds carry it). */
  extras?: AnthropicExtras;
}

const IMAGE = /^image\/(png|jpeg|gif|webp)$/;

/**
 * Gemini's Schema (an OpenAPI 3.0 subset: upper-case `type`, `nullable`, `propertyOrdering`) as JSON Schema, for the
 * internal request's tool parameters and response schema (checked by the gateway as JSON Schema, CONTRACT §11).
 */
export function jsonSchemaOf(schema: unknown): unknown {
  if (typeof schema !== 'object' || schema === null) return schema;
  if (Array.isArray(schema)) return schema.map(jsonSchemaOf);
  const s = schema as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s)) {
    if (k === 'nullable' || k === 'propertyOrdering' || k === 'example') continue;
    if (k === 'type' && typeof v === 'string') {
      if (v !== 'TYPE_UNSPECIFIED') out.type = v.toLowerCase();
    } else if (k === 'properties' && typeof v === 'object' && v !== null) {
      out.properties = Object.fromEntries(Object.entries(v).map(([name, p]) => [name, jsonSchemaOf(p)]));
    } else if (k === 'items' || k === 'anyOf') out[k] = jsonSchemaOf(v);
    else if (/^(min|max)(Items|Length|Properties)$/.test(k) && typeof v === 'string') out[k] = Number(v);
    else out[k] = v;
  }
  if (s.nullable === true && typeof out.type === 'string') out.type = [out.type, 'null'];
  return out;
}

const refuse = (field: string, what: string): never => {
  throw invalid(field, `${field}: ${what}`);
};

/** The text of a content's parts (systemInstruction, an embedding's content); a non-text part is refused. */
function textOf(content: GeminiContent, path: string): string {
  let text = '';
  content.parts.forEach((p, k) => {
    if (p.text === undefined || p.inlineData || p.functionCall || p.functionResponse) refuse(`${path}.parts[${k}]`, 'only text parts are supported here.');
    text += p.text;
  });
  return text;
}

/** The one kind of data a part holds. */
function partKind(p: GeminiPart, path: string): 'text' | 'inlineData' | 'functionCall' | 'functionResponse' {
  const kinds = (['text', 'inlineData', 'functionCall', 'functionResponse'] as const).filter((k) => p[k] !== undefined);
  if (kinds.length !== 1) refuse(path, 'a part holds exactly one of text, inlineData, functionCall, functionResponse.');
  return kinds[0]!;
}

/** contents as the internal messages: model turns as assistant messages, function responses as tool messages. */
function messagesOf(contents: GeminiContent[], fields: GeminiFields): ChatMessage[] {
  const messages: ChatMessage[] = [];
  // The calls of the latest model turn still unanswered, by name (a functionResponse without id answers the first).
  let open: { id: string; base: string; name: string }[] = [];
  contents.forEach((c, i) => {
    const at = `contents[${i}]`;
    if (c.role === 'model') {
      let text = '';
      const calls: ToolCall[] = [];
      const callPaths: string[] = [];
      c.parts.forEach((p, k) => {
        const path = `${at}.parts[${k}]`;
        // Thought summaries of an earlier turn are the model's own notes: not sent back.
        if (p.thought === true) return;
        const kind = partKind(p, path);
        if (kind === 'text') text += p.text;
        else if (kind === 'functionCall') {
          const f = p.functionCall!;
          const id = withThoughtSignature(f.id || `call_${i}_${k}`, p.thoughtSignature);
          calls.push({ id, type: 'function', function: { name: f.name, arguments: JSON.stringify(f.args ?? {}) } });
          callPaths.push(path);
        } else refuse(`${path}.${kind}`, 'a model turn holds text and functionCall parts only.');
      });
      open = calls.map((call) => ({ id: call.id, base: splitThoughtSignature(call.id).id, name: call.function.name }));
      messages.push(calls.length > 0 ? { role: 'assistant', content: text === '' ? null : text, tool_calls: calls } : { role: 'assistant', content: text });
      fields.messages.push({ path: at, ...(callPaths.length > 0 ? { calls: callPaths } : {}) });
      return;
    }
    const parts: ContentPart[] = [];
    const partPaths: string[] = [];
    c.parts.forEach((p, k) => {
      const path = `${at}.parts[${k}]`;
      if (p.thought === true) return;
      const kind = partKind(p, path);
      if (kind === 'functionResponse') {
        const r = p.functionResponse!;
        const index = r.id ? open.findIndex((o) => o.base === r.id || o.id === r.id) : open.findIndex((o) => o.name === r.name);
        const id = index === -1 ? (r.id ?? '') : open.splice(index, 1)[0]!.id;
        if (id === '') refuse(`${path}.functionResponse.name`, `no functionCall of "${r.name}" in the model turn before it awaits this response.`);
        messages.push({ role: 'tool', tool_call_id: id, content: JSON.stringify(r.response) });
        fields.messages.push({ path, callId: `${path}.functionResponse.id` });
      } else if (kind === 'text') {
        parts.push({ type: 'text', text: p.text! });
        partPaths.push(path);
      } else if (kind === 'inlineData') {
        const d = p.inlineData!;
        if (!IMAGE.test(d.mimeType)) refuse(`${path}.inlineData.mimeType`, `${d.mimeType.slice(0, 100)} is not supported: images (image/png, image/jpeg, image/gif, image/webp) only.`);
        const url = `data:${d.mimeType};base64,${d.data}`;
        if (!dataUrl(url)) refuse(`${path}.inlineData.data`, 'must be base64.');
        parts.push({ type: 'image_url', image_url: { url } });
        partPaths.push(path);
      } else refuse(`${path}.functionCall`, 'a user turn holds text, inlineData and functionResponse parts only.');
    });
    if (parts.length === 0) return;
    const one = parts.length === 1 && parts[0]!.type === 'text';
    messages.push({ role: 'user', content: one ? (parts[0] as { text: string }).text : parts });
    fields.messages.push({ path: at, content: partPaths });
  });
  return messages;
}

function toolChoiceOf(body: GenerateContentRequest, tools: FunctionTool[] | undefined): { choice?: ToolChoice; tools?: FunctionTool[] } {
  const config = body.toolConfig?.functionCallingConfig;
  if (!config) return { tools };
  const path = 'toolConfig.functionCallingConfig';
  const mode = config.mode ?? 'AUTO';
  const allowed = config.allowedFunctionNames ?? [];
  if (mode === 'VALIDATED') refuse(`${path}.mode`, 'VALIDATED is not supported: use AUTO, ANY or NONE.');
  if (allowed.length > 0 && mode !== 'ANY') refuse(`${path}.allowedFunctionNames`, 'is only allowed with mode ANY.');
  if (mode === 'NONE') return { choice: 'none', tools };
  if (mode === 'ANY') {
    if (!tools) refuse(`${path}.mode`, 'ANY needs tools.functionDeclarations.');
    allowed.forEach((name, j) => {
      if (!tools!.some((t) => t.function.name === name)) refuse(`${path}.allowedFunctionNames[${j}]`, `"${name.slice(0, 64)}" is not among the function declarations.`);
    });
    if (allowed.length === 1) return { choice: { type: 'function', function: { name: allowed[0]! } }, tools };
    // Several allowed names: only those are offered, and one must be called.
    return { choice: 'required', tools: allowed.length > 1 ? tools!.filter((t) => allowed.includes(t.function.name)) : tools };
  }
  return tools ? { choice: 'auto', tools } : {};
}

function responseFormatOf(body: GenerateContentRequest, fields: GeminiFields): ResponseFormat | undefined {
  const g = body.generationConfig ?? {};
  const mime = g.responseMimeType;
  if (g.responseSchema && g.responseJsonSchema) refuse('generationConfig.responseJsonSchema', 'give responseSchema or responseJsonSchema, not both.');
  const schema = g.responseJsonSchema ?? (g.responseSchema ? (jsonSchemaOf(g.responseSchema) as Record<string, unknown>) : undefined);
  fields.responseFormat = g.responseJsonSchema ? 'generationConfig.responseJsonSchema' : g.responseSchema ? 'generationConfig.responseSchema' : 'generationConfig.responseMimeType';
  if (mime === undefined || mime === 'text/plain') {
    if (schema) refuse(fields.responseFormat, 'needs responseMimeType "application/json".');
    return undefined;
  }
  if (mime !== 'application/json') refuse('generationConfig.responseMimeType', `${mime.slice(0, 100)} is not supported: "text/plain" or "application/json".`);
  return schema ? { type: 'json_schema', json_schema: { name: 'response', schema } } : { type: 'json_object' };
}

/** thinkingConfig as reasoning_effort: a level as is, a budget by size; -1 (dynamic) and includeThoughts alone ask nothing. */
function effortOf(body: GenerateContentRequest): InferenceRequest['reasoning_effort'] {
  const t = body.generationConfig?.thinkingConfig;
  if (!t) return undefined;
  if (t.thinkingLevel && t.thinkingLevel !== 'THINKING_LEVEL_UNSPECIFIED') return t.thinkingLevel.toLowerCase() as 'minimal' | 'low' | 'medium' | 'high';
  const b = t.thinkingBudget;
  if (b === undefined || b === -1) return undefined;
  return b === 0 ? 'minimal' : b <= 2048 ? 'low' : b <= 16384 ? 'medium' : 'high';
}

/** A generateContent request (the model from the path) as the internal chat request. */
export function chatRequestOfGemini(model: string, body: GenerateContentRequest): TranslatedRequest {
  if (body.safetySettings !== undefined) refuse('safetySettings', 'safety settings are not supported by the gateway (no provider kind carries them).');
  if (body.cachedContent !== undefined) refuse('cachedContent', 'cached contents are not supported by the gateway.');
  const g = body.generationConfig ?? {};

  const fields: GeminiFields = { messages: [], tools: [], responseFormat: 'generationConfig.responseMimeType' };
  const messages: ChatMessage[] = [];
  if (body.systemInstruction) {
    const text = textOf(body.systemInstruction, 'systemInstruction');
    if (text !== '') {
      messages.push({ role: 'system', content: text });
      fields.messages.push({ path: 'systemInstruction' });
    }
  }
  messages.push(...messagesOf(body.contents, fields));
  if (!messages.some((m) => m.role !== 'system')) refuse('contents', 'holds no part to answer.');

  const out: InferenceRequest = { model, messages: messages as InferenceRequest['messages'] };
  let tools: FunctionTool[] | undefined;
  (body.tools ?? []).forEach((tool, i) => {
    (tool.functionDeclarations ?? []).forEach((d, j) => {
      if (d.parameters && d.parametersJsonSchema) refuse(`tools[${i}].functionDeclarations[${j}].parametersJsonSchema`, 'give parameters or parametersJsonSchema, not both.');
      const parameters = d.parametersJsonSchema ?? (d.parameters ? (jsonSchemaOf(d.parameters) as Record<string, unknown>) : undefined);
      (tools ??= []).push({
        type: 'function',
        function: { name: d.name, ...(d.description !== undefined ? { description: d.description } : {}), ...(parameters ? { parameters } : {}) },
      });
      fields.tools.push(`tools[${i}].functionDeclarations[${j}]`);
    });
  });
  const chosen = toolChoiceOf(body, tools);
  if (chosen.tools) out.tools = chosen.tools as InferenceRequest['tools'];
  if (chosen.choice) out.tool_choice = chosen.choice as InferenceRequest['tool_choice'];

  if (g.maxOutputTokens !== undefined) out.max_tokens = g.maxOutputTokens;
  if (g.temperature !== undefined) out.temperature = g.temperature;
  if (g.topP !== undefined) out.top_p = g.topP;
  if (g.stopSequences !== undefined && g.stopSequences.length > 0) out.stop = g.stopSequences;
  if (g.candidateCount !== undefined) out.n = g.candidateCount;
  if (g.seed !== undefined) out.seed = g.seed;
  if (g.presencePenalty !== undefined) out.presence_penalty = g.presencePenalty;
  if (g.frequencyPenalty !== undefined) out.frequency_penalty = g.frequencyPenalty;
  if (g.responseLogprobs !== undefined) out.logprobs = g.responseLogprobs;
  if (g.logprobs !== undefined) out.top_logprobs = g.logprobs;
  const format = responseFormatOf(body, fields);
  if (format) out.response_format = format as InferenceRequest['response_format'];
  const effort = effortOf(body);
  if (effort) out.reasoning_effort = effort;
  return { request: out, fields, ...(g.topK !== undefined ? { extras: { fields: { top_k: g.topK } } } : {}) };
}

// ---- errors: the internal field names as the Gemini request's ----

const TOP_LEVEL: Record<string, string> = {
  model: 'model',
  messages: 'contents',
  max_tokens: 'generationConfig.maxOutputTokens',
  max_completion_tokens: 'generationConfig.maxOutputTokens',
  temperature: 'generationConfig.temperature',
  top_p: 'generationConfig.topP',
  stop: 'generationConfig.stopSequences',
  n: 'generationConfig.candidateCount',
  seed: 'generationConfig.seed',
  presence_penalty: 'generationConfig.presencePenalty',
  frequency_penalty: 'generationConfig.frequencyPenalty',
  logprobs: 'generationConfig.responseLogprobs',
  top_logprobs: 'generationConfig.logprobs',
  reasoning_effort: 'generationConfig.thinkingConfig',
  top_k: 'generationConfig.topK',
  tools: 'tools',
  tool_choice: 'toolConfig.functionCallingConfig',
  parallel_tool_calls: 'toolConfig',
};

/** An internal request field (`messages[2].content[0]`, `tools[1].function.name`, `seed`) as the Gemini request's. */
export function geminiField(param: string, fields: GeminiFields): string {
  const m = /^messages\[(\d+)\](?:\.(content|tool_calls)\[(\d+)\]|\.(tool_call_id))?(.*)$/.exec(param);
  if (m) {
    const msg = fields.messages[Number(m[1])];
    if (!msg) return 'contents';
    if (m[2] === 'content') return msg.content?.[Number(m[3])] ?? msg.path;
    if (m[2] === 'tool_calls') return msg.calls?.[Number(m[3])] ?? msg.path;
    if (m[4]) return msg.callId ?? msg.path;
    return msg.path;
  }
  const t = /^tools\[(\d+)\](?:\.function)?(.*)$/.exec(param);
  if (t) return `${fields.tools[Number(t[1])] ?? 'tools'}${t[2]}`;
  if (param === 'response_format' || param.startsWith('response_format.')) return fields.responseFormat;
  const top = /^([a-z_]+)(.*)$/.exec(param);
  const name = top ? TOP_LEVEL[top[1]!] : undefined;
  return name ? `${name}${top![2]}` : param;
}

/** A refusal naming an internal field, renamed to the Gemini request's field (its message too); other errors as they are. */
export function geminiError(err: unknown, fields: GeminiFields): unknown {
  if (!(err instanceof SvcError) || err.param === null) return err;
  const param = geminiField(err.param, fields);
  if (param === err.param) return err;
  // Only where the field is named as a whole (`n` is a field, not every letter n of the message).
  const named = new RegExp(`(?<![\\w.\\[\\]])${err.param.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![\\w\\[])`, 'g');
  const message = err.message.replace(named, () => param);
  return new SvcError(err.code, { param, message, headers: err.headers, details: err.details, cause: err });
}

// ---- the answer ----

/** The internal finish_reason as Gemini's finishReason (a candidate that called functions finished with STOP). */
export function geminiFinishReason(reason: string): string {
  if (reason === 'length') return 'MAX_TOKENS';
  if (reason === 'content_filter') return 'SAFETY';
  if (reason === 'stop' || reason === 'tool_calls') return 'STOP';
  return 'OTHER';
}

/** A tool call as a functionCall part, the thought signature its id carries (gemini kind) back on the part. */
export function functionCallPart(c: ToolCall) {
  const { id, signature } = splitThoughtSignature(c.id);
  return { functionCall: { id, name: c.function.name, args: argumentsObject(c.function.arguments) ?? {} }, ...(signature !== undefined ? { thoughtSignature: signature } : {}) };
}

function candidate(index: number, content: string | null, toolCalls: ToolCall[] | undefined, finishReason: string) {
  const parts: Record<string, unknown>[] = [];
  if (content) parts.push({ text: content });
  for (const c of toolCalls ?? []) parts.push(functionCallPart(c));
  if (parts.length === 0) parts.push({ text: '' });
  return { content: { role: 'model' as const, parts }, finishReason: geminiFinishReason(finishReason), index };
}

/**
 * Gemini's usageMetadata: thoughtsTokenCount apart from candidatesTokenCount, and cachedContentTokenCount (within
 * promptTokenCount), when the provider reported them.
 */
export function usageMetadataOf(r: InferenceResult) {
  const d = r.tokenDetails;
  const thoughts = Math.min(d?.reasoningTokens ?? 0, r.completionTokens);
  return {
    promptTokenCount: r.promptTokens,
    candidatesTokenCount: r.completionTokens - thoughts,
    totalTokenCount: r.promptTokens + r.completionTokens,
    ...(d?.cacheReadTokens ? { cachedContentTokenCount: d.cacheReadTokens } : {}),
    ...(thoughts > 0 ? { thoughtsTokenCount: thoughts } : {}),
  };
}

/** The GenerateContentResponse of an answer: one candidate per choice. */
export function presentGenerateContent(r: InferenceResult) {
  const candidates = r.choices
    ? r.choices.map((c) => candidate(c.index, c.content, c.toolCalls, c.finishReason))
    : [candidate(0, r.content, r.toolCalls, r.finishReason)];
  return { candidates, usageMetadata: usageMetadataOf(r), modelVersion: r.model, responseId: r.id };
}

/** A streamed text piece as a partial GenerateContentResponse. */
export const textChunk = (head: { id: string; model: string }, text: string, index = 0) => ({
  candidates: [{ content: { role: 'model' as const, parts: [{ text }] }, index }],
  modelVersion: head.model,
  responseId: head.id,
});

/** The stream's last chunk per candidate: its function calls (whole, as Gemini sends them), finishReason, usage. */
export function finalChunk(r: InferenceResult) {
  const whole = presentGenerateContent(r);
  for (const c of whole.candidates) {
    const calls = c.content.parts.filter((p) => 'functionCall' in p);
    c.content.parts = calls.length > 0 ? calls : [{ text: '' }];
  }
  return whole;
}

// ---- countTokens and embeddings ----

/** The embedding request of embedContent / batchEmbedContents: one text per content, one model, one dimensionality. */
export function embeddingsRequestOfGemini(model: string, body: EmbedContentRequest | BatchEmbedContentsRequest): EmbeddingsRequest {
  const batch = 'requests' in body;
  const requests = batch ? body.requests : [body];
  const input: string[] = [];
  let dims: number | undefined;
  requests.forEach((r, i) => {
    const at = batch ? `requests[${i}]` : '';
    const name = (f: string) => (at ? `${at}.${f}` : f);
    if (r.model !== undefined && r.model.replace(/^models\//, '') !== model) refuse(name('model'), `must be the model of the path (models/${model.slice(0, 200)}).`);
    if (i > 0 && r.outputDimensionality !== dims) refuse(name('outputDimensionality'), 'must be the same in every request of a batch.');
    dims = r.outputDimensionality;
    const text = textOf(r.content, name('content'));
    if (text === '') refuse(name('content'), 'must not be empty.');
    input.push(text);
  });
  return { model, input, ...(dims !== undefined ? { dimensions: dims } : {}) };
}

/** countTokens' request as the generateContent request it counts: `contents`, or `generateContentRequest`. */
export function countedRequestOfGemini(model: string, body: CountTokensRequest): GenerateContentRequest {
  if (body.generateContentRequest) {
    if (body.contents) refuse('contents', 'give contents or generateContentRequest, not both.');
    const { model: named, ...request } = body.generateContentRequest;
    if (named !== undefined && named.replace(/^models\//, '') !== model) refuse('generateContentRequest.model', `must be the model of the path (models/${model.slice(0, 200)}).`);
    return request;
  }
  if (!body.contents) throw invalid('contents', 'Missing required parameter: contents.');
  return { contents: body.contents };
}

/**
 * countTokens: the prompt's tokens as the gateway counts them when a provider reports none (the messages, plus tool
 * definitions, tool calls, images and a response schema): the figure the token window reserves. No provider is asked.
 */
export async function countGeminiTokens(ports: InferencePorts, ctx: Ctx, model: string, body: CountTokensRequest): Promise<number> {
  const { request, fields } = chatRequestOfGemini(model, countedRequestOfGemini(model, body));
  try {
    const v = validateInference(ports, ctx, request);
    return (await countPromptTokens(v.messages)) + v.extraTokens;
  } catch (err) {
    throw geminiError(err, fields);
  }
}
