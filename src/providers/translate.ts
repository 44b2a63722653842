import { randomBytes } from 'node:crypto';
import { contentText, type ChatMessage, type ProviderKind, type ProviderRequest } from './types.ts';

/**
 * Translation helpers the non-OpenAI kinds (anthropic, gemini, bedrock) share: the system prompt split out, data URLs,
 * tool-call arguments, the forced tool that carries structured output, and the check of what a kind cannot carry.
 */

type Req = Omit<ProviderRequest, 'signal'>;

/** The system and developer messages' text, joined by a blank line (these kinds take the system prompt apart). */
export function systemPrompt(messages: readonly ChatMessage[]): string {
  return messages
    .filter((m) => m.role === 'system' || m.role === 'developer')
    .map((m) => contentText(m.content))
    .filter((t) => t !== '')
    .join('\n\n');
}

export const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as const;

/** `data:image/png;base64,…` as its media type and base64 data; null for anything else. */
export function dataUrl(url: string): { mediaType: (typeof IMAGE_TYPES)[number]; data: string } | null {
  const m = /^data:(image\/(?:png|jpeg|gif|webp));base64,([A-Za-z0-9+/=\s]+)$/.exec(url);
  return m ? { mediaType: m[1] as (typeof IMAGE_TYPES)[number], data: m[2]!.replace(/\s+/g, '') } : null;
}

/** A tool call's arguments as the JSON object these kinds want; undefined when they are not one. */
export function argumentsObject(text: string): Record<string, unknown> | undefined {
  if (text.trim() === '') return {};
  try {
    const v = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/** A tool call id for a provider that gives none (Gemini before ids): `call_` and 24 random hex digits. */
export const newCallId = (): string => `call_${randomBytes(12).toString('hex')}`;

/**
 * Structured output on kinds without a JSON mode of their own (anthropic, bedrock): one tool whose input schema is the
 * requested schema, forced with tool_choice; its input becomes the answer's text (finish_reason stop). Null when the
 * request asks for none.
 */
export interface ResponseTool {
  name: string;
  description: string;
  schema: Record<string, unknown>;
}

export function responseTool(req: Req): ResponseTool | null {
  const f = req.options?.response_format;
  if (!f || f.type === 'text') return null;
  if (f.type === 'json_object') {
    return { name: 'json_object', description: 'Answer with a JSON object as the input of this tool.', schema: { type: 'object' } };
  }
  return {
    name: f.json_schema.name,
    description: f.json_schema.description ?? 'Answer with the input of this tool, which follows the response schema.',
    schema: f.json_schema.schema ?? { type: 'object' },
  };
}

/** What a kind carries among the optional fields of the chat-completions request. */
export interface Carries {
  n?: boolean;
  seed?: boolean;
  penalties?: boolean;
  /** parallel_tool_calls: false. */
  serialToolCalls?: boolean;
  /** response_format json_schema/json_object through a forced tool (then not together with tools). */
  forcedToolFormat?: boolean;
  /** reasoning_effort (gemini: thinkingConfig). */
  reasoningEffort?: boolean;
  /** An image_url part's URL the kind can send. */
  imageUrl: (url: string) => boolean;
}

/**
 * The first field (OpenAI name, path for message parts) a kind cannot carry, or null. logit_bias, logprobs,
 * top_logprobs and reasoning_effort are carried by no kind that uses this check.
 */
export function firstUnsupported(req: Req, carries: Carries): string | null {
  const o = req.options ?? {};
  if ((o.n ?? 1) > 1 && !carries.n) return 'n';
  if (o.logit_bias && Object.keys(o.logit_bias).length > 0) return 'logit_bias';
  if (o.logprobs) return 'logprobs';
  if (o.top_logprobs !== undefined && o.top_logprobs !== null) return 'top_logprobs';
  if (o.reasoning_effort !== undefined && !carries.reasoningEffort) return 'reasoning_effort';
  if (req.sampling.seed !== undefined && !carries.seed) return 'seed';
  if (!carries.penalties) {
    if ((req.sampling.presence_penalty ?? 0) !== 0) return 'presence_penalty';
    if ((req.sampling.frequency_penalty ?? 0) !== 0) return 'frequency_penalty';
  }
  if (o.parallel_tool_calls === false && !carries.serialToolCalls) return 'parallel_tool_calls';
  const format = o.response_format;
  if (carries.forcedToolFormat && format && format.type !== 'text') {
    // The forced tool would take the tools' place; a schema that is not an object cannot be a tool's input.
    if (o.tools && o.tools.length > 0) return 'response_format';
    const schema = format.type === 'json_schema' ? format.json_schema.schema : undefined;
    if (schema && schema.type !== undefined && schema.type !== 'object') return 'response_format';
    if (format.type === 'json_schema' && !/^[A-Za-z0-9_-]{1,64}$/.test(format.json_schema.name)) return 'response_format';
  }
  const calls = new Set<string>();
  for (const [i, m] of req.messages.entries()) {
    if (Array.isArray(m.content)) {
      for (const [j, part] of m.content.entries()) {
        if (part.type === 'image_url' && !carries.imageUrl(part.image_url.url)) return `messages[${i}].content[${j}]`;
      }
    }
    for (const [j, call] of (m.tool_calls ?? []).entries()) {
      calls.add(call.id);
      if (argumentsObject(call.function.arguments) === undefined) return `messages[${i}].tool_calls[${j}].function.arguments`;
    }
    // These kinds pair a tool result with its call by id (Gemini also needs the call's name).
    if (m.role === 'tool' && (!m.tool_call_id || !calls.has(m.tool_call_id))) return `messages[${i}].tool_call_id`;
  }
  return null;
}

/** Consecutive turns of one role merged into one (Anthropic, Gemini and Bedrock want user and assistant to alternate). */
export function mergeTurns<T extends { role: string }>(turns: T[], key: 'content' | 'parts' = 'content'): T[] {
  const out: T[] = [];
  for (const t of turns) {
    const last = out.at(-1) as Record<string, unknown> | undefined;
    const items = (t as Record<string, unknown>)[key] as unknown[];
    if (items.length === 0) continue;
    if (last && last.role === t.role) (last[key] as unknown[]).push(...items);
    else out.push({ ...t, [key]: [...items] });
  }
  return out;
}

/**
 * The Anthropic Messages field (ChatOptions.anthropic) a kind cannot carry, or null: `top_k`, a thinking budget and
 * context edits other than clearing thinking only the anthropic kind sends. Hints are dropped elsewhere: adaptive
 * thinking, output_config.effort, cache_control, history thinking blocks, clear_thinking edits.
 */
export function extrasUnsupported(kind: ProviderKind, req: Req): string | null {
  const f = req.options?.anthropic?.fields;
  if (!f || kind === 'anthropic') return null;
  // Gemini takes top_k as generationConfig.topK.
  if (f.top_k !== undefined && kind !== 'gemini') return 'top_k';
  if ((f.thinking as { type?: string } | undefined)?.type === 'enabled') return 'thinking';
  const edits = (f.context_management as { edits?: Array<{ type?: string }> } | undefined)?.edits ?? [];
  if (edits.some((e) => !String(e?.type).startsWith('clear_thinking'))) return 'context_management';
  return null;
}

// ---- Gemini's thought signatures, carried in the tool call id ----

/**
 * Gemini 3 answers a function call with a `thoughtSignature` on its part and refuses (400 INVALID_ARGUMENT) a later
 * request whose history holds that functionCall without it. The gateway's tool call has an id and nothing else that
 * every client sends back (OpenAI's tool_calls[].id and tool_call_id, Anthropic's tool_use.id and tool_use_id), so the
 * signature rides in the id: `<id>__ts_<signature as base64url>` (`__tu_` + the UTF-8 bytes as base64url when the
 * signature is not canonical base64). Only characters [A-Za-z0-9_-] are added, so the id stays valid for Anthropic's
 * and Bedrock's id pattern. The gemini kind takes it apart again; every other kind sends the id without it.
 */
const SIG = '__ts_';
const SIG_TEXT = '__tu_';
const CANONICAL_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** The tool call id carrying Gemini's thought signature (the id as is when there is none). */
export function withThoughtSignature(id: string, signature: unknown): string {
  if (typeof signature !== 'string' || signature === '') return id;
  if (CANONICAL_BASE64.test(signature)) return `${id}${SIG}${signature.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')}`;
  return `${id}${SIG_TEXT}${Buffer.from(signature, 'utf8').toString('base64url')}`;
}

/** A tool call id as the provider's own id and the thought signature it carries, if any. */
export function splitThoughtSignature(id: string): { id: string; signature?: string } {
  const at = id.search(/__t[su]_/);
  if (at === -1) return { id };
  const mark = id.slice(at, at + SIG.length);
  const rest = id.slice(at + SIG.length);
  if (mark === SIG) {
    const b64 = rest.replace(/-/g, '+').replace(/_/g, '/');
    return { id: id.slice(0, at), signature: b64 + '='.repeat((4 - (b64.length % 4)) % 4) };
  }
  if (mark === SIG_TEXT) return { id: id.slice(0, at), signature: Buffer.from(rest, 'base64url').toString('utf8') };
  return { id };
}

const hasSignature = (id: string | undefined) => id !== undefined && (id.includes(SIG) || id.includes(SIG_TEXT));

/**
 * The messages with Gemini's thought signatures taken out of their tool call ids, for the kinds that do not take them
 * (OpenAI limits an id to 40 characters, Bedrock to 64). The same array when no id carries one (the usual case).
 */
export function withoutThoughtSignatures<M extends ChatMessage>(messages: M[]): M[] {
  if (!messages.some((m) => hasSignature(m.tool_call_id) || m.tool_calls?.some((c) => hasSignature(c.id)))) return messages;
  return messages.map((m) => {
    if (hasSignature(m.tool_call_id)) return { ...m, tool_call_id: splitThoughtSignature(m.tool_call_id!).id };
    if (m.tool_calls?.some((c) => hasSignature(c.id))) {
      return { ...m, tool_calls: m.tool_calls.map((c) => (hasSignature(c.id) ? { ...c, id: splitThoughtSignature(c.id).id } : c)) };
    }
    return m;
  });
}

/** Fields a provider's refusal may name in backticks (its own names), as the chat request names them. */
const REFUSED_FIELDS: Record<string, string> = {
  temperature: 'temperature',
  top_p: 'top_p',
  topP: 'top_p',
  top_k: 'top_k',
  topK: 'top_k',
  max_tokens: 'max_tokens',
  maxTokens: 'max_tokens',
  stop_sequences: 'stop',
  stopSequences: 'stop',
};

/**
 * The request field a provider's 400 names, when it names one the gateway knows: Anthropic's and Bedrock's refusal of
 * `temperature` together with `top_p` (Claude 4.5-generation models: "`temperature` and `top_p` cannot both be
 * specified for this model") names the first, `temperature`.
 */
export function refusedField(message: string): string | null {
  for (const m of message.matchAll(/`([A-Za-z_]+)`/g)) {
    const field = REFUSED_FIELDS[m[1]!];
    if (field) return field;
  }
  return null;
}
