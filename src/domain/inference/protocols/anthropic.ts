import { type Static } from 'typebox';
import { invalid, SvcError } from '../../../errors/svc-error.ts';
import type { AnthropicExtras, ChatMessage, ContentPart, FunctionTool, ToolCall, ToolChoice } from '../../../providers/types.ts';
import { InferenceRequest } from '../schema.ts';
import { markChecked } from '../validate.ts';
import { ContentBlock, TOOL_EXTRAS, Tool, type CountTokensRequest, type MessagesRequest } from './anthropic-schema.ts';

/**
 * The Anthropic Messages API (CONTRACT §19: POST /v1/messages and /v1/messages/count_tokens) translated to the
 * gateway's chat request: the request's translation (its schema is anthropic-schema.ts; the Message answer and the
 * stream's event sequence are anthropic-answer.ts). The pipeline and every provider kind run as for
 * /v1/chat/completions; what the chat request has no field for (cache_control, thinking blocks, top_k, the thinking
 * config, context edits, effort, anthropic-beta, is_error) rides along as ChatOptions.anthropic, which the anthropic kind puts back on its
 * wire (providers/anthropic.ts toAnthropic: the same mapping the kind uses for every request), bedrock's cache points
 * aside the other kinds drop or refuse (providers/translate.ts extrasUnsupported).
 */

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
