import { ProviderError, usageParts, type Choice, type Completion, type ProviderRequest, type ProviderUsage, type StreamPart, type ToolCall } from './types.ts';
import { withoutThoughtSignatures } from './translate.ts';
import { errorMessage, jsonEvent, type StreamTranslator } from './upstream.ts';

/**
 * OpenAI's chat-completions wire format, both ways: the answers' usage and the stream's chunks for kind openai, and
 * the whole format for kinds that speak it under another URL and auth (azure_openai).
 * The internal request is that format already, so the body is the request's own fields, set ones only.
 */

type Req = Omit<ProviderRequest, 'signal'>;

export function usageOf(raw: unknown): ProviderUsage | null {
  if (typeof raw !== 'object' || raw === null) return null;
  const u = raw as Record<string, unknown>;
  const p = u.prompt_tokens;
  const c = u.completion_tokens;
  if (typeof p !== 'number' || typeof c !== 'number' || !Number.isInteger(p) || !Number.isInteger(c) || p < 0 || c < 0) return null;
  // prompt_tokens counts the cached tokens; completion_tokens the reasoning tokens.
  const pd = u.prompt_tokens_details as Record<string, unknown> | null | undefined;
  const cd = u.completion_tokens_details as Record<string, unknown> | null | undefined;
  if (!pd && !cd) return { promptTokens: p, completionTokens: c };
  return { promptTokens: p, completionTokens: c, ...usageParts(pd?.cached_tokens, null, cd?.reasoning_tokens) };
}

/** The chat-completions body; `model` only where the URL does not name it; `developer` messages as `system` when the
 *  API version predates that role. */
export function chatBody(req: Req, stream: boolean, model?: string, developerAsSystem = false): Record<string, unknown> {
  const o = req.options ?? {};
  let messages = withoutThoughtSignatures(req.messages);
  if (developerAsSystem && messages.some((m) => m.role === 'developer')) {
    messages = messages.map((m) => (m.role === 'developer' ? { ...m, role: 'system' } : m));
  }
  const body: Record<string, unknown> = { ...(model !== undefined ? { model } : {}), messages, ...req.sampling };
  if (req.maxTokens !== undefined) {
    // Reasoning models take only max_completion_tokens; older API versions know only max_tokens.
    body[o.reasoning_effort !== undefined ? 'max_completion_tokens' : 'max_tokens'] = req.maxTokens;
  }
  for (const key of [
    'tools',
    'tool_choice',
    'parallel_tool_calls',
    'response_format',
    'n',
    'logit_bias',
    'logprobs',
    'top_logprobs',
    'user',
    'reasoning_effort',
  ] as const) {
    if (o[key] !== undefined) body[key] = o[key];
  }
  if (stream) Object.assign(body, { stream: true, stream_options: { include_usage: true } });
  return body;
}

function toolCallsOf(raw: unknown): ToolCall[] | undefined {
  if (!Array.isArray(raw) || raw.length === 0) return undefined;
  return raw.map((c: any) => ({
    id: String(c?.id ?? ''),
    type: 'function' as const,
    function: { name: String(c?.function?.name ?? ''), arguments: String(c?.function?.arguments ?? '') },
  }));
}

/** A chat-completions answer as a Completion, every choice kept. */
export function fromChatCompletion(parsed: any, name: string): Completion {
  const raw: any[] = Array.isArray(parsed?.choices) ? parsed.choices : [];
  const choices: Choice[] = raw.map((c, i) => {
    const content = c?.message?.content;
    if (typeof content !== 'string' && content !== null && content !== undefined) {
      throw new ProviderError('protocol', `${name}: choices[${i}].message.content is not text`);
    }
    const toolCalls = toolCallsOf(c?.message?.tool_calls);
    return {
      index: typeof c?.index === 'number' ? c.index : i,
      content: content ?? null,
      finishReason: typeof c?.finish_reason === 'string' ? c.finish_reason : 'stop',
      ...(toolCalls ? { toolCalls } : {}),
      ...(c?.logprobs ? { logprobs: c.logprobs } : {}),
      ...(typeof c?.message?.refusal === 'string' ? { refusal: c.message.refusal } : {}),
    };
  });
  const first = choices[0];
  if (!first) throw new ProviderError('protocol', `${name}: the response has no choices`);
  return {
    content: first.content ?? '',
    finishReason: first.finishReason,
    ...(first.toolCalls ? { toolCalls: first.toolCalls } : {}),
    ...(first.logprobs ? { logprobs: first.logprobs } : {}),
    ...(choices.length > 1 ? { choices } : {}),
    usage: usageOf(parsed.usage),
  };
}

/** Chat-completion chunks as StreamParts, every choice (choice 0 without `choice`), until `[DONE]`. */
export class ChatChunkStream implements StreamTranslator<string> {
  private done = false;

  constructor(
    private readonly name: string,
    private readonly redact: (text: string) => string,
  ) {}

  *push(data: string): Iterable<StreamPart> {
    if (this.done) return;
    if (data === '[DONE]') {
      this.done = true;
      return;
    }
    const chunk = jsonEvent(data, this.name);
    if (chunk?.error) throw new ProviderError('status', `${this.name}: error in stream: ${errorMessage(this.redact(data))}`);
    // Azure sends prompt_filter_results in a first chunk without choices.
    for (const c of Array.isArray(chunk?.choices) ? chunk.choices : []) {
      const index = typeof c?.index === 'number' ? c.index : 0;
      const at = index === 0 ? {} : { choice: index };
      const d = c?.delta ?? {};
      if (typeof d.content === 'string' && d.content !== '') yield { type: 'delta', content: d.content, ...at };
      for (const t of Array.isArray(d.tool_calls) ? d.tool_calls : []) {
        yield {
          type: 'tool_call',
          index: typeof t?.index === 'number' ? t.index : 0,
          ...(typeof t?.id === 'string' ? { id: t.id } : {}),
          ...(typeof t?.function?.name === 'string' ? { name: t.function.name } : {}),
          arguments: typeof t?.function?.arguments === 'string' ? t.function.arguments : '',
          ...at,
        };
      }
      if (c?.logprobs) yield { type: 'logprobs', logprobs: c.logprobs, ...at };
      if (typeof c?.finish_reason === 'string') yield { type: 'finish', finishReason: c.finish_reason, ...at };
    }
    const usage = usageOf(chunk?.usage);
    if (usage) yield { type: 'usage', usage };
  }

  *end(): Iterable<StreamPart> {}
}
